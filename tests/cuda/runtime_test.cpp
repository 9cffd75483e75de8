// The CUDA backend's pieces that need no GPU: the kernel calling convention
// (host and NVRTC must agree on StepArgs), the driver ABI constants (checked
// against cuda.h when the toolkit is present), the target choice.
#include "cuda/device.h"
#include "cuda/kernel_abi.h"

#include <gtest/gtest.h>

#include <cstddef>

#if __has_include(<cuda.h>)
#include <cuda.h>
#define LLMC_HAVE_CUDA_H 1
#endif

namespace llmc::cuda {
namespace {

// Pointers, then ints: the same layout for x86-64 and NVPTX64.
static_assert(sizeof(abi::StepArgs) == 168, "StepArgs layout changed: update both sides");
static_assert(offsetof(abi::StepArgs, out) == 24 && offsetof(abi::StepArgs, kvKeys) == 64 &&
                  offsetof(abi::StepArgs, workspace) == 128 && offsetof(abi::StepArgs, rows) == 152,
              "StepArgs field offsets");
// Every op kind's weights fit (LinearQ4: qweight, scales, zeros, bias).
static_assert(sizeof(abi::StepArgs::w) / sizeof(void *) == 4, "StepArgs weight slots");
static_assert(sizeof(abi::SyntheticFillArgs) == 56 && offsetof(abi::SyntheticFillArgs, cols) == 40,
              "SyntheticFillArgs layout");
static_assert(sizeof(abi::ArgmaxArgs) == 24, "ArgmaxArgs layout");

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

TEST(CudaRuntime, DriverConstantsMatchCudaH) {
#ifndef LLMC_HAVE_CUDA_H
  GTEST_SKIP() << "no cuda.h on this machine; the constants were not compared";
#endif
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

} // namespace
} // namespace llmc::cuda
