// The calling convention between the CUDA backend (runtime/cuda) and the
// kernels that codegen generates (codegen/cuda). Every step kernel takes one
// StepArgs by value; what a kernel reads from it depends on its op kind
// (engine.fbs). Shapes, dtypes and tile sizes are compile-time constants of
// the kernel, so the struct only carries what changes between launches:
// pointers, the token count and the batch's sequence layout. The weights'
// addresses never change after load, so they sit in a device array per step
// (one pointer in the arguments, however many weights a fused kind has).
//
// Compiled by the host compiler (runtime) and by NVRTC (generated kernels):
// no standard library, fixed-width fields, explicit padding, so both sides
// agree on the layout (checked by static_asserts on the host).
#pragma once

namespace llmc::abi {

// One step launch. Pointers are device addresses.
struct StepArgs {
  const void *in[3];      // input buffers, row-major [rows, width] (arena + offset_per_token * T)
  void *out;              // output buffer [rows, width]
  const void *const *w;   // [numWeights] device array of the step's weight addresses in
                          // engine.fbs order (Linear: W, bias; RmsNormLinear: gamma, W,
                          // bias; RmsNormLinearQ4: gamma, qweight, scales, zeros, bias),
                          // written once at load: no fixed number of weight slots
  void *kvKeys;           // Attention: this layer's keys [numBlocks, blockSize, kvHeads, headDim]
  void *kvValues;         // Attention: this layer's values, same layout
  const int *positions;   // [T] position of each row in its sequence
  const int *rowSequence; // [T] index of the sequence each row belongs to
  const int *seqFirstRow; // [numSequences] first row of each sequence in this step
  const int *seqNumRows;  // [numSequences] rows of each sequence in this step
  const int *blockTables; // [numSequences, blockTableStride] KV block ids
  const int *logitRows;   // Logits: [numLogitRows] rows whose logits are computed
  void *workspace;        // scratch (split partial results), no initial contents
  int *counters;          // zero-initialized; every kernel leaves them zero again
  int *errorFlag;         // set to a non-zero code when a kernel meets bad input
  int rows;               // T: tokens in this step
  int numSequences;
  int blockTableStride; // entries per sequence in blockTables
  int numLogitRows;     // Logits: rows computed (the output holds them compacted)
  int numWeights;       // entries of w (the step's weight count)
  int pad;              // explicit: the struct is a multiple of 8 bytes on both sides
};

// The synthetic-weight fill kernels (llmc_synthetic_fill_<dtype>): element i
// of the output is value (first + i) of the tensor (kernels/common/synthetic.h).
// llmc_synthetic_fill_q4 (kinds 3..5): out is the whole int4 part and
// [first, first + count) are (row, group) cells, cell = row * groups + group
// (kernels/common/q4_rtn.h).
struct SyntheticFillArgs {
  void *out;
  unsigned long long count;
  unsigned long long first;
  unsigned long long seed;
  float stddev;
  int kind;       // fb::SyntheticKind: 0 Normal, 1 Ones, 2 Zeros, 3 Q4Weight, 4 Q4Scales, 5 Q4Zeros
  long long cols; // Q4 kinds: K of the float matrix
  long long groupSize; // Q4 kinds: G
};
#if !defined(__CUDACC_RTC__)
inline constexpr const char *kSyntheticFillQ4Kernel = "llmc_synthetic_fill_q4";
inline constexpr const char *kTopKKernel = "llmc_topk_f32";
#endif

// The argmax kernel (llmc_argmax_f32): out[r] = argmax of logits[r, 0..cols).
struct ArgmaxArgs {
  const float *logits;
  int *out;
  int rows;
  int cols;
};

// The top-k kernel (llmc_topk_f32): per row r of logits [rows, cols], the
// tokens whose sampling score (kernels/common/sampling.h samplingScore at
// `temperature`) is >= the k-th largest: counts[r] = how many; when that is
// at most kTopKCapacity, their scores and ids sorted by score descending then
// id in scores/ids [rows, kTopKCapacity] (sampling::topKCandidates).
struct TopKArgs {
  const float *logits;
  float *scores;
  int *ids;
  int *counts;
  int rows;
  int cols;
  int k; // 1 .. kTopKMaxK
  float temperature;
};

// Values written to *errorFlag.
enum ErrorCode : int { kErrorNone = 0, kErrorTokenOutOfRange = 1 };

} // namespace llmc::abi
