// One CPU op: what a plan step runs with on the CPU backend, and the
// registry of the per-op files (cpu/ops/<op>.cpp). CpuExecutor
// (cpu/backend/cpu_executor.h) looks each step's function up once at load;
// its step loop is then a table lookup. A new op kind: its file here, its
// declaration below, its case in registry.cpp (a switch without default).
#pragma once

#include "cpu/attention.h"
#include "cpu/backend/loaded_weights.h"
#include "engine/step.h"
#include "kv/kv_cache.h"
#include "plan/plan.h"
#include "support/thread_pool.h"

#include <cstdint>
#include <vector>

namespace llmc::cpu {

// Scratch the ops reuse from step to step (the executor owns it).
struct OpScratch {
  std::vector<float> norm;     // normalized rows of a GEMM's norm prologue, of LmHead's rows
  std::vector<float> products; // gate and up products of an int4 gated GEMM
  std::vector<float> scaled;   // a Linear's product before its output_scale
  std::vector<float> rows;     // gathered rows of a selective Logits or LmHead step
  std::vector<float> logits;   // [R, V] of a selective Logits step
  std::vector<int64_t> argmaxRows, logitRows; // LmHead: rows taking ids, rows taking logits
  std::vector<int32_t> argmaxIds;
  std::vector<float> headLogits; // LmHead over quantized weights: the argmax rows' logits
};

// What one step of one run sees. The plan validator has checked the step's
// operands, parameters and shapes; the ops index without checks.
struct OpContext {
  ThreadPool &pool;
  const fb::Program &program;
  const fb::Step &step;
  const LoadedWeights &weights;
  const StepInput &input;
  kv::KvCache &cache;
  StepOutput &result;                             // filled by LmHead
  uint8_t *arena;                                 // activations of this run (T rows)
  const float *ropeTable;                         // the step's cos/sin [max_seq_len, rotary_dim]
  const int32_t *ropeRows;                        // [T] ropeTable's row of each row (positions,
                                                  //   or 0..T-1 for a per-step table)
  const std::vector<AttentionSequence> &sequences; // the run's sequences, in row order
  const std::vector<int64_t> &outputRows;         // input.outputs' rows; empty: 0 .. T-1
  OpScratch &scratch;
  const float *&lastLogits; // a step whose logits are not in the logits buffer sets this

  int64_t tokens() const { return input.numTokens; }
  float *buffer(int index) const {
    return reinterpret_cast<float *>(arena +
                                     program.buffers()->Get(index)->offset_per_token() * tokens());
  }
  int64_t width(int index) const { return program.buffers()->Get(index)->width(); }
  float *in(int i) const { return buffer(step.inputs()->Get(i)); }
  float *out(int i = 0) const { return buffer(step.outputs()->Get(i)); }
  int64_t inWidth(int i) const { return width(step.inputs()->Get(i)); }
  int64_t outWidth(int i = 0) const { return width(step.outputs()->Get(i)); }
  uint32_t weight(int i) const { return static_cast<uint32_t>(step.weights()->Get(i)); }
  WeightMatrix matrix(int i) const { return weights.matrix(weight(i)); }
  WeightVector vector(int i) const { return weights.vector(weight(i)); }
  const float *f32(int i) const { return static_cast<const float *>(weights.data(weight(i))); }
  // The rows `rows` of input 0 ([rows.size(), width], gathered into
  // scratch.rows), or the whole buffer when `rows` is empty.
  const float *selectRows(const std::vector<int64_t> &rows) const;
};

using OpFunction = Status (*)(const OpContext &);

// The CPU function of an op kind (registry.cpp).
OpFunction opFunction(fb::OpKind kind);

// The per-op files.
Status embeddingStep(const OpContext &c);   // ops/embedding.cpp
Status normStep(const OpContext &c);        // ops/norm.cpp
Status linearStep(const OpContext &c);      // ops/linear.cpp
Status ropeStep(const OpContext &c);        // ops/rope.cpp
Status attentionStep(const OpContext &c);   // ops/attention.cpp
Status elementwiseStep(const OpContext &c); // ops/elementwise.cpp
Status activationStep(const OpContext &c);  // ops/activation.cpp
Status logitsStep(const OpContext &c);      // ops/logits.cpp
Status lmHeadStep(const OpContext &c);      // ops/lm_head.cpp

// Shared by the ops: y [rows, V] = x [rows, H] . W^T (+ bias) for the
// matrix of a Logits or LmHead step, dense, int4 or int8 (LogitsParams.weights:
// `llmc build --quantize-lm-head`), through the Linear kernels.
void projectVocabulary(const OpContext &c, const fb::LogitsParams &p, const float *x,
                       int64_t rows, const float *bias, float *y);

// Shared by the ops: RMSNorm of `rows` rows of x [rows, width] into y with
// a norm's parameters (the validator admits only what this runs).
void applyNorm(const OpContext &c, const fb::NormParams &norm, int gammaWeight, const float *x,
               int64_t rows, float *y);

} // namespace llmc::cpu
