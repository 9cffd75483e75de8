#include "cpu/isa.h"

#include "support/env.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
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
#elif defined(__aarch64__)
  return Isa::Neon; // Advanced SIMD is mandatory in AArch64 (and the kernels need nothing else)
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

bool detectDotProd() {
#if defined(__aarch64__) && defined(__linux__)
  // HWCAP_ASIMDDP is bit 20 of AT_HWCAP (asm/hwcap.h); spelled out for older headers.
  constexpr unsigned long kHwcapAsimdDp = 1ul << 20;
  return (getauxval(AT_HWCAP) & kHwcapAsimdDp) != 0;
#else
  return false;
#endif
}

bool detectX86Vnni() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return detectBestIsa() == Isa::Avx512 && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

std::atomic<bool> &x86VnniInUse() {
  static std::atomic<bool> use{x86VnniSupported()};
  return use;
}

// Whether the CPU runs the AVX-512 kernels and CPUID.(EAX=7, ECX=subleaf)
// sets `bit` of EAX (inEax) or ECX. Read directly: not every compiler's
// __builtin_cpu_supports knows these features.
bool avx512CpuidLeaf7Bit(unsigned subleaf, bool inEax, unsigned bit) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax, ebx, ecx, edx;
  return detectBestIsa() == Isa::Avx512 && __get_cpuid_count(7, subleaf, &eax, &ebx, &ecx, &edx) &&
         ((inEax ? eax : ecx) & (1u << bit)) != 0;
#else
  return false;
#endif
}

bool detectX86Bf16() { return avx512CpuidLeaf7Bit(1, true, 5); } // AVX512_BF16

bool detectX86Vbmi() { return avx512CpuidLeaf7Bit(0, false, 1); } // AVX512_VBMI

// On where supported, unless LLMC_CPU_BF16_DOT=0.
std::atomic<bool> &x86Bf16InUse() {
  static std::atomic<bool> use{x86Bf16Supported() && envSwitchOn("LLMC_CPU_BF16_DOT")};
  return use;
}

std::atomic<bool> &dotProdInUse() {
  static std::atomic<bool> use{neonDotProdSupported()};
  return use;
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
  case Isa::Neon:
    return "neon";
  }
  return "?";
}

std::string activeKernelsName() {
  std::string name = isaName(activeIsa());
  if (activeIsa() == Isa::Neon && neonDotProdActive())
    name += " + dotprod";
  if (x86VnniActive())
    name += " + vnni";
  if (x86Bf16Active())
    name += " + bf16";
  return name;
}

// Within x86-64, AVX-512 CPUs (as detected) also run the AVX2 kernels.
bool isaSupported(Isa isa) {
  const Isa best = bestIsa();
  switch (isa) {
  case Isa::Scalar:
    return true;
  case Isa::Avx2:
    return best == Isa::Avx2 || best == Isa::Avx512;
  case Isa::Avx512:
    return best == Isa::Avx512;
  case Isa::Neon:
    return best == Isa::Neon;
  }
  return false;
}

Isa activeIsa() { return forcedIsa().load(std::memory_order_relaxed); }

bool setIsaForTesting(Isa isa) {
  if (!isaSupported(isa))
    return false;
  forcedIsa().store(isa, std::memory_order_relaxed);
  return true;
}

bool neonDotProdSupported() {
  static const bool supported = detectDotProd();
  return supported;
}

bool neonDotProdActive() { return dotProdInUse().load(std::memory_order_relaxed); }

bool setNeonDotProdForTesting(bool use) {
  if (use && !neonDotProdSupported())
    return false;
  dotProdInUse().store(use, std::memory_order_relaxed);
  return true;
}

bool x86VnniSupported() {
  static const bool supported = detectX86Vnni();
  return supported;
}

bool x86VnniActive() {
  return activeIsa() == Isa::Avx512 && x86VnniInUse().load(std::memory_order_relaxed);
}

bool setX86VnniForTesting(bool use) {
  if (use && !x86VnniSupported())
    return false;
  x86VnniInUse().store(use, std::memory_order_relaxed);
  return true;
}

bool x86Bf16Supported() {
  static const bool supported = detectX86Bf16();
  return supported;
}

bool x86Bf16Active() {
  return activeIsa() == Isa::Avx512 && x86Bf16InUse().load(std::memory_order_relaxed);
}

bool setX86Bf16ForTesting(bool use) {
  if (use && !x86Bf16Supported())
    return false;
  x86Bf16InUse().store(use, std::memory_order_relaxed);
  return true;
}

bool x86VbmiSupported() {
  static const bool supported = detectX86Vbmi();
  return supported;
}

long l2CacheBytes() {
#if defined(_SC_LEVEL2_CACHE_SIZE)
  static const long bytes = std::max(0L, sysconf(_SC_LEVEL2_CACHE_SIZE));
  return bytes;
#else
  return 0;
#endif
}

} // namespace llmc::cpu
