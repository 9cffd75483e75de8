#include "cpu/activation_rows.h"

#include "cpu/isa.h"
#include "kernels/common/activations.h"

namespace llmc::cpu {
namespace {

// The AVX2 lanes where the CPU has them (AVX-512 CPUs too: the bits are the
// scalar loop's either way).
bool vectorRows() {
#if defined(__x86_64__)
  const Isa isa = activeIsa();
  return isa == Isa::Avx2 || isa == Isa::Avx512;
#else
  return false;
#endif
}

bool isSilu(int gateKind) {
  return gateKind != hd::kGateGeluTanh && gateKind != hd::kGateGeluErf && gateKind != hd::kGateRelu;
}

} // namespace

void siluRow(const float *x, float *y, int64_t n) {
#if defined(__x86_64__)
  if (vectorRows()) {
    detail::siluRowAvx2(x, y, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i)
    y[i] = siluOfRow(x[i]);
}

void gatedRow(int gateKind, const float *gate, const float *up, float *y, int64_t n) {
  if (!isSilu(gateKind)) {
    for (int64_t i = 0; i < n; ++i)
      y[i] = hd::gated(gateKind, gate[i], up[i]);
    return;
  }
#if defined(__x86_64__)
  if (vectorRows()) {
    detail::swigluRowAvx2(gate, up, y, n);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i)
    y[i] = siluOfRow(gate[i]) * up[i];
}

} // namespace llmc::cpu
