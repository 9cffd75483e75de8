#include "cpu/isa.h"

#include <atomic>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace llmc::cpu {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// Not every compiler's __builtin_cpu_supports knows "f16c": CPUID.1:ECX bit 29.
bool hasF16c() {
  unsigned eax, ebx, ecx, edx;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
}
#endif

Isa detectBestIsa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && hasF16c();
  bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl");
  if (avx512)
    return Isa::Avx512;
  if (avx2)
    return Isa::Avx2;
#endif
  return Isa::Scalar;
}

Isa bestIsa() {
  static const Isa best = detectBestIsa();
  return best;
}

std::atomic<Isa> &forcedIsa() {
  static std::atomic<Isa> isa{bestIsa()};
  return isa;
}

} // namespace

const char *isaName(Isa isa) {
  switch (isa) {
  case Isa::Scalar:
    return "scalar";
  case Isa::Avx2:
    return "avx2";
  case Isa::Avx512:
    return "avx512";
  }
  return "?";
}

bool isaSupported(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(bestIsa()); }

Isa activeIsa() { return forcedIsa().load(std::memory_order_relaxed); }

bool setIsaForTesting(Isa isa) {
  if (!isaSupported(isa))
    return false;
  forcedIsa().store(isa, std::memory_order_relaxed);
  return true;
}

} // namespace llmc::cpu
