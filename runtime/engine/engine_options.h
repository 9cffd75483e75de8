// How an Engine and its backend are set up (llmrun's and the server's
// options, the C API's). Backend-neutral: the CPU and CUDA backends read it.
#pragma once

#include <cstdint>
#include <string>

namespace llmc {

struct EngineOptions {
  int threads = 0;                // 0: all cores
  int64_t kvCacheTokens = 0;      // token slots in the KV pool; 0: max_seq_len * maxSequences
  int64_t maxSequences = 1;       // used to size the KV pool when kvCacheTokens == 0
  bool verifyWeights = true;      // recompute the plan's weight checksum at load
  std::string device = "cpu";     // "cpu", "cuda" or "auto" (CUDA when usable, else CPU)
  int cudaDevice = 0;             // ordinal of the GPU
  double gpuMemoryFraction = 0.9; // of the GPU's memory for weights, activations, KV cache
  bool cudaGraphs = true;         // replay decode steps as CUDA graphs
  bool cublasLt = true;           // plain bf16 GEMMs of any-T programs on cuBLASLt when it loads
  // Element type of the KV cache: "auto" (the CPU's f32; the GPU's, the
  // plan's attention dtype), "f32" or "f16" (the CPU backend; a GPU plan's
  // cache holds what its kernels read, so there it must match that).
  std::string kvCacheDtype = "auto";
};

} // namespace llmc
