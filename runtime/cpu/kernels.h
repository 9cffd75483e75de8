// The CPU backend's element-wise, normalization, embedding, RoPE and argmax
// kernels. Activations are row-major [T tokens, features] f32 (the tokens of
// all sequences of a batch step, flattened); arithmetic is f32. Unless noted,
// an output may alias an input of the same shape (in place).
#pragma once

#include "cpu/weights.h"
#include "kernels/common/rope.h"
#include "support/status.h"
#include "support/thread_pool.h"

#include <cstdint>
#include <vector>

namespace llmc::cpu {

// y[i] = a[i] + b[i] for i < n.
void add(ThreadPool &pool, const float *a, const float *b, float *y, int64_t n);

// y[i] = a[i] * b[i] for i < n.
void mul(ThreadPool &pool, const float *a, const float *b, float *y, int64_t n);

// y[i] = x[i] * sigmoid(x[i]) for i < n.
void silu(ThreadPool &pool, const float *x, float *y, int64_t n);

// y[i] = gelu(x[i]) for i < n: the tanh approximation with `tanh`, else the
// exact erf form (kernels/common/activations.h).
void gelu(ThreadPool &pool, const float *x, float *y, int64_t n, bool tanh);

// y[i] = act(gate[i]) * up[i] for i < n, act the GateKind `gate`
// (kernels/common/activations.h): silu (SwiGLU) by default, gelu for GeGLU.
void swiglu(ThreadPool &pool, const float *gate, const float *up, float *y, int64_t n,
            int gateKind = 0);

// x[i] = cap * tanh(x[i] / cap) for i < n (logit soft-capping); cap > 0.
void softCap(ThreadPool &pool, float *x, int64_t n, float cap);

// x[i] *= factor for i < n (Gemma's embedding scale).
void scale(ThreadPool &pool, float *x, int64_t n, float factor);

// The fused gate/up projection form: gateUp [tokens, 2 * inter] holds gate in
// columns [0, inter) and up in [inter, 2 * inter) (HF Phi-3's gate_up_proj
// chunk order); y [tokens, inter] = silu(gate) * up. Rows run in parallel,
// so y must not overlap gateUp.
void swigluFused(ThreadPool &pool, const float *gateUp, int64_t tokens, int64_t inter, float *y);

// RMSNorm (HF LlamaRMSNorm): y = x / sqrt(mean(x^2) + eps) * (offset + w),
// per row of x [tokens, hidden]; w [hidden] in F32, F16 or BF16; offset 1 is
// Gemma's (1 + w), added to w in f32.
void rmsNorm(ThreadPool &pool, const float *x, int64_t tokens, const WeightVector &w, float eps,
             float *y, float offset = 0.0f);

// Gathers rows ids[t] of table [V, H] into y [tokens, H] as f32. Fails, naming
// the position and the id, when an id is outside [0, V).
Status embedding(ThreadPool &pool, const WeightMatrix &table, const int32_t *ids, int64_t tokens,
                 float *y);

// out[r] = the index of the largest of x[r, 0 .. cols) (the first one on ties,
// as torch.argmax; NaNs are ignored; 0 for an all-NaN row).
void argmax(const float *x, int64_t rows, int64_t cols, int32_t *out);

// invFreq[i] for i < rotaryDim / 2 (kernels/common/rope.h); computed once per model.
void ropeInvFreqs(int rotaryDim, float theta, const hd::RopeScaling &scaling, float *invFreq);

// The cos/sin table of positions [0, positions): row p (rotaryDim floats) is
// cos(p * invFreq[i]) for i < rotaryDim / 2, then the sines, with the angle
// and cos/sin taken in f32 as HF does. Built once per model at load, so no
// step computes a cos or a sin.
// cos and sin times `attentionFactor` (yarn, longrope; 1 otherwise).
std::vector<float> ropeTable(int64_t positions, int rotaryDim, const float *invFreq,
                             float attentionFactor = 1.0f);

// Shape of a RoPE application: `heads` heads of `headDim` features per row,
// of which the first `rotaryDim` (even, <= headDim) rotate.
struct RopeShape {
  int64_t heads;
  int64_t headDim;
  int64_t rotaryDim;
  bool interleaved = false; // pairs (2i, 2i + 1) (GPT-J, Cohere) instead of halves
};

// Rotates x in place: row t (x + t * ldx, ldx >= heads * headDim, so q and k
// may live in one fused qkv buffer) at position positions[t]; pair i of each
// head is (i, i + rotaryDim / 2), or (2i, 2i + 1) when interleaved, with
// angle positions[t] * invFreq[i], its cos/sin read from row positions[t] of
// `table` (ropeTable).
void rope(ThreadPool &pool, float *x, int64_t tokens, int64_t ldx, const RopeShape &shape,
          const int32_t *positions, const float *table);

} // namespace llmc::cpu
