// The CUDA backend's pieces that need no GPU: the kernel calling convention
// (host and NVRTC must agree on StepArgs), the driver and cuBLASLt ABI
// constants (checked against cuda.h and cublasLt.h when the toolkit is
// present), the toolkit's libcublasLt exporting what the runtime resolves,
// the target choice.
#include "cuda/cublaslt.h"
#include "cuda/device.h"
#include "cuda/kernel_abi.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <fstream>

#if __has_include(<cuda.h>)
#include <cuda.h>
#define LLMC_HAVE_CUDA_H 1
#endif
#if __has_include(<cublasLt.h>)
#include <cublasLt.h>
#define LLMC_HAVE_CUBLASLT_H 1
#endif

namespace llmc::cuda {
namespace {

// Pointers, then ints: the same layout for x86-64 and NVPTX64.
static_assert(sizeof(abi::StepArgs) == 152, "StepArgs layout changed: update both sides");
static_assert(offsetof(abi::StepArgs, out) == 24 && offsetof(abi::StepArgs, w) == 32 &&
                  offsetof(abi::StepArgs, kvKeys) == 40 &&
                  offsetof(abi::StepArgs, workspace) == 104 &&
                  offsetof(abi::StepArgs, rows) == 128 &&
                  offsetof(abi::StepArgs, numWeights) == 144,
              "StepArgs field offsets");
// The weights are one pointer to a device array of any length, not slots
// in the arguments: a fused kind may take any number of weights.
static_assert(sizeof(abi::StepArgs::w) == sizeof(void *), "StepArgs weight array");
static_assert(sizeof(abi::SyntheticFillArgs) == 56 && offsetof(abi::SyntheticFillArgs, cols) == 40,
              "SyntheticFillArgs layout");
static_assert(sizeof(abi::ArgmaxArgs) == 24, "ArgmaxArgs layout");
static_assert(sizeof(abi::TopKArgs) == 48 && offsetof(abi::TopKArgs, rows) == 32,
              "TopKArgs layout");

// The ABI constants are compared at compile time only (no run-time test: one
// that is empty where the headers exist could never fail). Without the
// toolkit's headers they are not compared at all.
#ifdef LLMC_HAVE_CUDA_H
static_assert(kCudaErrorNoDevice == CUDA_ERROR_NO_DEVICE);
static_assert(kAttrMultiprocessorCount == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
static_assert(kAttrComputeCapabilityMajor == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
static_assert(kAttrComputeCapabilityMinor == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
static_assert(kAttrMaxSharedMemoryPerBlockOptin ==
              CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
static_assert(kFuncAttrMaxDynamicSharedSizeBytes ==
              CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
static_assert(kJitErrorLogBuffer == CU_JIT_ERROR_LOG_BUFFER);
static_assert(kJitErrorLogBufferSizeBytes == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
static_assert(kStreamNonBlocking == CU_STREAM_NON_BLOCKING);
static_assert(kStreamCaptureModeThreadLocal == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
static_assert(sizeof(CUdeviceptr) == sizeof(::CUdeviceptr));
#endif

#ifdef LLMC_HAVE_CUBLASLT_H
static_assert(kCublasSuccess == CUBLAS_STATUS_SUCCESS);
static_assert(kCublasNotSupported == CUBLAS_STATUS_NOT_SUPPORTED);
static_assert(kCublasComputeF32 == CUBLAS_COMPUTE_32F);
static_assert(kCudaR32F == CUDA_R_32F && kCudaR16BF == CUDA_R_16BF);
static_assert(kCublasOpN == CUBLAS_OP_N && kCublasOpT == CUBLAS_OP_T);
static_assert(kLtDescTransA == CUBLASLT_MATMUL_DESC_TRANSA);
static_assert(kLtDescTransB == CUBLASLT_MATMUL_DESC_TRANSB);
static_assert(kLtDescEpilogue == CUBLASLT_MATMUL_DESC_EPILOGUE);
static_assert(kLtDescBiasPointer == CUBLASLT_MATMUL_DESC_BIAS_POINTER);
static_assert(kLtDescBiasDataType == CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE);
static_assert(kLtEpilogueDefault == CUBLASLT_EPILOGUE_DEFAULT);
static_assert(kLtEpilogueBias == CUBLASLT_EPILOGUE_BIAS);
static_assert(kLtPrefMaxWorkspaceBytes == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
static_assert(kLtPrefMinAlignmentA == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES);
static_assert(kLtPrefMinAlignmentB == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES);
static_assert(kLtPrefMinAlignmentC == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES);
static_assert(kLtPrefMinAlignmentD == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
static_assert(sizeof(CublasStatus) == sizeof(cublasStatus_t));
static_assert(sizeof(LtMatmulAlgo) == sizeof(cublasLtMatmulAlgo_t));
static_assert(sizeof(LtHeuristicResult) == sizeof(cublasLtMatmulHeuristicResult_t));
static_assert(offsetof(LtHeuristicResult, workspaceSize) ==
                  offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize) &&
              offsetof(LtHeuristicResult, state) ==
                  offsetof(cublasLtMatmulHeuristicResult_t, state));
#endif

TEST(CudaRuntime, CublasLtErrorsNameTheCallAndTheStatus) {
  Status status = checkLtCall(15, "lt.matmul(...)", "/src/runtime/cuda/cublaslt.cpp", 12);
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.message(), "cuBLASLt call lt.matmul(...) failed: CUBLAS_STATUS_NOT_SUPPORTED "
                              "(15) at runtime/cuda/cublaslt.cpp:12");
  EXPECT_TRUE(checkLtCall(0, "lt.create(&h)", __FILE__, __LINE__).isOk());
}

// One process: the explicit file first (missing), then the toolkit's.
TEST(CudaRuntime, CublasLtLoadsFromLlmcLibcublasltOrSaysWhyNot) {
  setenv("LLMC_LIBCUBLASLT", "/nonexistent/libcublasLt.so.13", 1);
  auto missing = CublasLt::load();
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.message().find("cannot open cuBLASLt: /nonexistent/libcublasLt.so.13"),
            std::string::npos)
      << missing.message();
#if defined(LLMC_TOOLKIT_LIBCUBLASLT) && defined(LLMC_HAVE_CUBLASLT_H)
  if (std::ifstream(LLMC_TOOLKIT_LIBCUBLASLT).good()) {
    setenv("LLMC_LIBCUBLASLT", LLMC_TOOLKIT_LIBCUBLASLT, 1);
    auto toolkit = CublasLt::load(); // resolves every entry point; no GPU needed
    unsetenv("LLMC_LIBCUBLASLT");
    ASSERT_TRUE(toolkit.isOk()) << toolkit.message();
    EXPECT_EQ((*toolkit)->path(), LLMC_TOOLKIT_LIBCUBLASLT);
    EXPECT_EQ((*toolkit)->version().rfind(std::to_string(CUBLAS_VER_MAJOR) + ".", 0), 0u)
        << (*toolkit)->version();
    return;
  }
#endif
  unsetenv("LLMC_LIBCUBLASLT");
  GTEST_SKIP() << "no toolkit libcublasLt to resolve the entry points in";
}

TEST(CudaRuntime, PicksTheCubinOnHopperAndPtxOnOtherRecentGpus) {
  DeviceInfo hopper;
  hopper.major = 9;
  hopper.minor = 0;
  EXPECT_EQ(pickTarget(hopper, true, true), fb::Target::Sm90a);
  EXPECT_EQ(pickTarget(hopper, false, true), fb::Target::Ptx);
  DeviceInfo ampere;
  ampere.major = 8;
  ampere.minor = 6;
  EXPECT_EQ(pickTarget(ampere, true, true), fb::Target::Ptx);
  EXPECT_EQ(pickTarget(ampere, true, false), fb::Target::Cpu);
  DeviceInfo blackwell;
  blackwell.major = 10;
  EXPECT_EQ(pickTarget(blackwell, true, true), fb::Target::Ptx); // sm_90a cubins run on 9.0 only
  DeviceInfo turing;
  turing.major = 7;
  turing.minor = 5;
  EXPECT_EQ(pickTarget(turing, true, true), fb::Target::Cpu);
}

TEST(CudaRuntime, DriverVersionsThatModulesNeed) {
  EXPECT_EQ(cudaVersionText(13000), "13.0");
  EXPECT_EQ(cudaVersionText(12080), "12.8");
  auto isa = [](const std::string &ptx) { return ptxIsaDriverVersion(ptx.data(), ptx.size()); };
  EXPECT_EQ(isa("//\n// Generated by NVIDIA NVVM Compiler\n.version 9.0\n.target sm_80\n"), 13000);
  EXPECT_EQ(isa(".version 9.1\n"), 13010);
  EXPECT_EQ(isa(".version 8.7\n"), 12080);
  EXPECT_EQ(isa(".version 8.5\n"), 12050);
  EXPECT_EQ(isa(".version 8.0\n"), 12000);
  EXPECT_EQ(isa(".target sm_80\n"), 0);
  const uint8_t cubin[4] = {0x7f, 'E', 'L', 'F'};
  EXPECT_EQ(moduleDriverVersion(fb::Target::Sm90a, cubin, 4, 13020), 13000); // minor compatibility
  EXPECT_EQ(moduleDriverVersion(fb::Target::Sm90a, cubin, 4, 0), 13000);     // older plans
  const std::string ptx = ".version 9.0\n";
  EXPECT_EQ(moduleDriverVersion(fb::Target::Ptx, reinterpret_cast<const uint8_t *>(ptx.data()),
                                ptx.size(), 13000),
            13000);
  EXPECT_EQ(kCublasLtDriverVersion, 13000);
}

} // namespace
} // namespace llmc::cuda
