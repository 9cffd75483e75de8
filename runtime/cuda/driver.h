// The CUDA driver API, opened with dlopen at run time (never linked: a
// machine without an NVIDIA driver still loads llmrun and runs the CPU
// backend). Declares the few types and entry points the backend uses, with
// the ABI of cuda.h (values checked against it in tests when the toolkit is
// present), so the runtime builds without the CUDA toolkit.
//
// Every call goes through LLMC_CU, which turns a failure into a Status that
// names the call, the error and file:line:
//   LLMC_CU(cu.memAlloc(&ptr, bytes));
//   -> "CUDA call cu.memAlloc(&ptr, bytes) failed: CUDA_ERROR_OUT_OF_MEMORY
//       (out of memory) at runtime/cuda/cuda_backend.cpp:123"
#pragma once

#include "support/status.h"

#include <cstddef>
#include <string>

namespace llmc::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUevent = struct CUevent_st *;
using CUgraph = struct CUgraph_st *;
using CUgraphExec = struct CUgraphExec_st *;

constexpr CUresult kCudaSuccess = 0;
constexpr CUresult kCudaErrorNoDevice = 100;

// CUdevice_attribute values.
constexpr int kAttrMultiprocessorCount = 16;
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;
constexpr int kAttrMaxSharedMemoryPerBlockOptin = 97;
// CUfunction_attribute.
constexpr int kFuncAttrMaxDynamicSharedSizeBytes = 8;
// CUjit_option.
constexpr int kJitErrorLogBuffer = 5;
constexpr int kJitErrorLogBufferSizeBytes = 6;
// Stream flags and capture modes.
constexpr unsigned kStreamNonBlocking = 1;
constexpr int kStreamCaptureModeThreadLocal = 1;

// Entry points, named after the driver's without the "cu" prefix; each is
// resolved by its versioned symbol (e.g. cuMemAlloc_v2), as cuda.h maps it.
struct DriverApi {
  CUresult (*init)(unsigned flags);
  CUresult (*driverGetVersion)(int *version);
  CUresult (*getErrorName)(CUresult error, const char **name);
  CUresult (*getErrorString)(CUresult error, const char **text);
  CUresult (*deviceGetCount)(int *count);
  CUresult (*deviceGet)(CUdevice *device, int ordinal);
  CUresult (*deviceGetName)(char *name, int length, CUdevice device);
  CUresult (*deviceGetAttribute)(int *value, int attribute, CUdevice device);
  CUresult (*deviceTotalMem)(size_t *bytes, CUdevice device);
  CUresult (*devicePrimaryCtxRetain)(CUcontext *context, CUdevice device);
  CUresult (*devicePrimaryCtxRelease)(CUdevice device);
  CUresult (*ctxSetCurrent)(CUcontext context);
  CUresult (*memGetInfo)(size_t *free, size_t *total);
  CUresult (*memAlloc)(CUdeviceptr *pointer, size_t bytes);
  CUresult (*memFree)(CUdeviceptr pointer);
  CUresult (*memcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);
  CUresult (*memcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);
  CUresult (*memcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream);
  CUresult (*memcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*memsetD8Async)(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream);
  CUresult (*memcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*streamCreate)(CUstream *stream, unsigned flags);
  CUresult (*streamDestroy)(CUstream stream);
  CUresult (*streamSynchronize)(CUstream stream);
  CUresult (*moduleLoadDataEx)(CUmodule *module, const void *image, unsigned numOptions,
                               int *options, void **values);
  CUresult (*moduleUnload)(CUmodule module);
  CUresult (*moduleGetFunction)(CUfunction *function, CUmodule module, const char *name);
  CUresult (*funcSetAttribute)(CUfunction function, int attribute, int value);
  CUresult (*launchKernel)(CUfunction f, unsigned gridX, unsigned gridY, unsigned gridZ,
                           unsigned blockX, unsigned blockY, unsigned blockZ, unsigned sharedBytes,
                           CUstream stream, void **params, void **extra);
  CUresult (*streamBeginCapture)(CUstream stream, int mode);
  CUresult (*streamEndCapture)(CUstream stream, CUgraph *graph);
  CUresult (*graphInstantiate)(CUgraphExec *exec, CUgraph graph, unsigned long long flags);
  CUresult (*graphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*graphExecDestroy)(CUgraphExec exec);
  CUresult (*graphDestroy)(CUgraph graph);
  CUresult (*eventCreate)(CUevent *event, unsigned flags);
  CUresult (*eventDestroy)(CUevent event);
  CUresult (*eventRecord)(CUevent event, CUstream stream);
  CUresult (*eventSynchronize)(CUevent event);
  CUresult (*eventElapsedTime)(float *milliseconds, CUevent start, CUevent end);
};

// The loaded driver library (process-wide, loaded once, never unloaded).
class Driver {
public:
  // Opens libcuda.so.1 (then libcuda.so) and resolves every entry point.
  // Fails, saying what is missing, on a machine without an NVIDIA driver.
  // $LLMC_LIBCUDA names another library file (tests point it at a stub).
  static Expected<const Driver *> load();

  const DriverApi &api() const { return api_; }
  const std::string &path() const { return path_; }

private:
  DriverApi api_{};
  std::string path_;
};

// The Status of a driver call: ok, or an error naming the call, the
// driver's error name and text, and file:line.
Status checkCall(CUresult result, const char *call, const char *file, int line);

} // namespace llmc::cuda

// Returns from the enclosing function when a driver call fails.
#define LLMC_CU(call)                                                                              \
  LLMC_RETURN_IF_ERROR(::llmc::cuda::checkCall((call), #call, __FILE__, __LINE__))
