// The CPU's SiLU and gated activations over a row of floats, with the exp of
// the attention weights (attention_exp.h) in place of hd::expF:
//   silu(x) = x / (1 + attentionExp(-x)),  gated silu(g, u) = silu(g) * u,
// each step rounded once (the division exact IEEE). The AVX2 lanes and the
// scalar loop (NEON, scalar, any tail) give the same bits: one SiLU for
// decode and prefill, fused and unfused, on every ISA. The other GateKinds
// (gelu, relu) keep hd::gated / hd::activate as they are.
#pragma once

#include "cpu/attention_exp.h"

#include <cstdint>

namespace llmc::cpu {

// The scalar definition of every lane below.
inline float siluOfRow(float x) { return x / (1.0f + detail::attentionExp(-x)); }

// y[i] = siluOfRow(x[i]) for i < n (y may be x).
void siluRow(const float *x, float *y, int64_t n);

// y[i] = act(gate[i]) * up[i] for i < n, act the GateKind `gateKind`
// (kernels/common/activations.h): siluOfRow for silu (and any unknown kind,
// as hd::gated), hd::gated's formula for the others. y may be gate or up.
void gatedRow(int gateKind, const float *gate, const float *up, float *y, int64_t n);

namespace detail {
#if defined(__x86_64__)
// The AVX2 lanes of siluRow and of gatedRow's silu (for the tests).
void siluRowAvx2(const float *x, float *y, int64_t n);
void swigluRowAvx2(const float *gate, const float *up, float *y, int64_t n);
#endif
} // namespace detail

} // namespace llmc::cpu
