// cuBLASLt, opened with dlopen at run time and never linked (like libcuda,
// cuda/driver.h): a machine without the library runs the plan's own GEMM
// kernels. Declares the few types, enum values and entry points the CUDA
// backend uses, with the ABI of cublasLt.h (checked against it in
// tests/cuda/runtime_test.cpp when the toolkit is present), so the runtime
// builds without the toolkit.
//
// Every call goes through LLMC_CUBLASLT, whose error names the call, the
// status and file:line:
//   "cuBLASLt call lt.matmul(...) failed: CUBLAS_STATUS_EXECUTION_FAILED (13)
//    at runtime/cuda/cublaslt.cpp:210"
#pragma once

#include "cuda/device.h"

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llmc::cuda {

using CublasStatus = int; // cublasStatus_t
using LtHandle = struct LtContext *;
using LtMatmulDesc = struct LtMatmulDescOpaque *;
using LtMatrixLayout = struct LtMatrixLayoutOpaque *;
using LtMatmulPreference = struct LtMatmulPreferenceOpaque *;

// cublasLtMatmulAlgo_t: opaque, filled in by the heuristic.
struct LtMatmulAlgo {
  uint64_t data[8];
};

// cublasLtMatmulHeuristicResult_t.
struct LtHeuristicResult {
  LtMatmulAlgo algo;
  size_t workspaceSize;
  CublasStatus state;
  float wavesCount;
  int reserved[4];
};

constexpr CublasStatus kCublasSuccess = 0;
constexpr CublasStatus kCublasNotSupported = 15;
constexpr int kCublasComputeF32 = 68;         // cublasComputeType_t CUBLAS_COMPUTE_32F
constexpr int kCudaR32F = 0, kCudaR16BF = 14; // cudaDataType_t
constexpr int32_t kCublasOpN = 0, kCublasOpT = 1;
// cublasLtMatmulDescAttributes_t.
constexpr int kLtDescTransA = 3;        // int32_t
constexpr int kLtDescTransB = 4;        // int32_t
constexpr int kLtDescEpilogue = 7;      // uint32_t
constexpr int kLtDescBiasPointer = 8;   // const void *
constexpr int kLtDescBiasDataType = 26; // int32_t (cudaDataType_t)
// cublasLtEpilogue_t.
constexpr uint32_t kLtEpilogueDefault = 1, kLtEpilogueBias = 4;
// cublasLtMatmulPreferenceAttributes_t.
constexpr int kLtPrefMaxWorkspaceBytes = 1; // uint64_t
constexpr int kLtPrefMinAlignmentA = 5;     // uint32_t bytes, B, C, D follow
constexpr int kLtPrefMinAlignmentB = 6;
constexpr int kLtPrefMinAlignmentC = 7;
constexpr int kLtPrefMinAlignmentD = 8;

// Entry points, named after cublasLt's without the "cublasLt" prefix. Enum
// parameters are int (their C ABI).
struct CublasLtApi {
  CublasStatus (*create)(LtHandle *handle);
  CublasStatus (*destroy)(LtHandle handle);
  size_t (*getVersion)();
  CublasStatus (*matmulDescCreate)(LtMatmulDesc *desc, int computeType, int scaleType);
  CublasStatus (*matmulDescDestroy)(LtMatmulDesc desc);
  CublasStatus (*matmulDescSetAttribute)(LtMatmulDesc desc, int attribute, const void *value,
                                         size_t bytes);
  CublasStatus (*matrixLayoutCreate)(LtMatrixLayout *layout, int type, uint64_t rows, uint64_t cols,
                                     int64_t ld);
  CublasStatus (*matrixLayoutDestroy)(LtMatrixLayout layout);
  CublasStatus (*matmulPreferenceCreate)(LtMatmulPreference *preference);
  CublasStatus (*matmulPreferenceDestroy)(LtMatmulPreference preference);
  CublasStatus (*matmulPreferenceSetAttribute)(LtMatmulPreference preference, int attribute,
                                               const void *value, size_t bytes);
  CublasStatus (*matmulAlgoGetHeuristic)(LtHandle handle, LtMatmulDesc desc, LtMatrixLayout a,
                                         LtMatrixLayout b, LtMatrixLayout c, LtMatrixLayout d,
                                         LtMatmulPreference preference, int requested,
                                         LtHeuristicResult *results, int *returned);
  CublasStatus (*matmul)(LtHandle handle, LtMatmulDesc desc, const void *alpha, const void *a,
                         LtMatrixLayout aLayout, const void *b, LtMatrixLayout bLayout,
                         const void *beta, const void *c, LtMatrixLayout cLayout, void *d,
                         LtMatrixLayout dLayout, const LtMatmulAlgo *algo, void *workspace,
                         size_t workspaceBytes, CUstream stream);
};

// A loaded cuBLASLt (process-wide, never unloaded).
class CublasLt {
public:
  // Opens $LLMC_LIBCUBLASLT when set (only that file), else
  // libcublasLt.so.13, then libcublasLt.so, and resolves every entry point.
  // Each file is opened once; a failure says what is missing.
  static Expected<const CublasLt *> load();

  const CublasLtApi &api() const { return api_; }
  const std::string &path() const { return path_; }
  // "13.1.0", from cublasLtGetVersion.
  std::string version() const;

private:
  static Expected<const CublasLt *> open(const std::vector<std::string> &names);

  CublasLtApi api_{};
  std::string path_;
};

// The Status of a cuBLASLt call: ok, or an error naming the call, the
// status and file:line.
Status checkLtCall(CublasStatus status, const char *call, const char *file, int line);

// One bf16 GEMM, row-major: Y[M, N] (+)= X[M, K] * W[N, K]^T (+ bias[N]),
// as engine.fbs's LibraryGemm describes it (with M, the step's rows, and the
// device addresses).
struct LtGemmCall {
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0; // row strides of W, X and Y, in elements
  float alpha = 1.0f;                // the product's scale (LinearParams.output_scale)
  float beta = 0.0f;                 // 1: Y += ..., Y's contents are the residual
  CUdeviceptr w = 0, x = 0, y = 0;
  CUdeviceptr bias = 0; // F32 [N], or 0
};

// cuBLASLt on one device: a handle, one fixed workspace (so that calls can
// be captured in a CUDA graph), and per GEMM shape and M the descriptors,
// layouts and algorithm the heuristic picked, or the fact that it found
// none. Steps of equal shape share an entry (the bias pointer is set per
// call). Not thread-safe, like Device.
class LtGemms {
public:
  static constexpr uint64_t kWorkspaceBytes = uint64_t(32) << 20;
  static constexpr size_t kMaxCachedShapes = 4096; // trim() clears the cache beyond this

  // Creates the handle and allocates the workspace on `device`.
  static Expected<std::unique_ptr<LtGemms>> create(const CublasLt &library, Device &device);
  ~LtGemms();
  LtGemms(const LtGemms &) = delete;
  LtGemms &operator=(const LtGemms &) = delete;

  // Finds (host work only: descriptors and the heuristic, nothing on the
  // stream) the algorithm for `call`'s shape: false when cuBLASLt has none.
  // Call it before capturing a graph that runs the GEMM.
  Expected<bool> prepare(const LtGemmCall &call);
  // Enqueues the GEMM on the device's stream; false, with nothing enqueued,
  // when cuBLASLt has no algorithm for the shape (the caller launches its
  // own kernel instead).
  Expected<bool> run(const LtGemmCall &call);
  // Bounds the cache: clears it when it holds more than kMaxCachedShapes.
  void trim();

  const CublasLt &library() const { return *library_; }
  CUdeviceptr workspace() const { return workspace_.get(); }
  size_t cachedShapes() const { return plans_.size(); }

private:
  // Descriptors of one shape; found == false: no algorithm.
  struct Plan {
    LtMatmulDesc desc = nullptr;
    LtMatrixLayout a = nullptr, b = nullptr, cd = nullptr;
    LtMatmulAlgo algo{};
    bool found = false;
  };
  // m, n, k, lda, ldb, ldc, beta's bits, the bias's alignment (0: no bias),
  // the alignments of W, X and Y (the algorithms depend on them).
  using Key = std::array<int64_t, 11>;

  LtGemms(const CublasLt &library, Device &device) : library_(&library), device_(&device) {}
  Expected<const Plan *> plan(const LtGemmCall &call);
  Status createPlan(const LtGemmCall &call, Plan &plan);
  void destroy(Plan &plan);

  const CublasLt *library_;
  Device *device_;
  LtHandle handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<Key, Plan> plans_;
};

} // namespace llmc::cuda

// Returns from the enclosing function when a cuBLASLt call fails.
#define LLMC_CUBLASLT(call)                                                                        \
  LLMC_RETURN_IF_ERROR(::llmc::cuda::checkLtCall((call), #call, __FILE__, __LINE__))
