// A stand-in for libcuda.so.1 for the CUDA backend's host-side tests on a
// machine without a GPU: device memory is host memory, copies are memcpy,
// kernels do not run. Every launch of a step kernel is checked: its grid,
// and that each pointer of its StepArgs, and each weight address of its
// weight array, lies inside a live allocation (the backend's address
// arithmetic). Loaded through $LLMC_LIBCUDA; the test
// reads what it saw through the fakeCuda* functions, and injects faults
// through the fakeCudaSet* / fakeCudaFail* ones: an old driver version, out
// of memory above a size, a launch that fails (invalidating a capture), an
// asynchronous fault that the next synchronization reports.
#include "cuda/kernel_abi.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

using CUresult = int;
constexpr CUresult kOk = 0, kInvalidValue = 1, kOutOfMemory = 2, kNotFound = 500,
                   kCaptureInvalidated = 901;

struct State {
  std::mutex mutex;
  std::map<uintptr_t, size_t> allocations; // base -> bytes
  std::vector<std::string> functions;      // CUfunction = index + 1
  std::string error;                       // first violation seen
  long launches = 0, graphLaunches = 0, graphsCaptured = 0;
  std::map<std::string, long> launchesByName; // direct and captured
  std::map<std::string, int> weightsByName;   // StepArgs.numWeights of a step kernel's last launch
  bool capturing = false;
  long capturedLaunches = 0;
  uint64_t total = uint64_t(4) << 30;
  uint64_t allocated = 0;
  int driverVersion = 13000;
  uint64_t failAllocationsAbove = 0;          // 0: none fail
  std::string failLaunchOf, failSyncAfter;    // kernel names ("" none)
  CUresult failLaunchCode = 0, failSyncCode = 0;
  bool captureInvalid = false, syncFaultPending = false;
  uint64_t lastWorkspaceBytes = 0; // allocation holding the last step's StepArgs.workspace
};

State &state() {
  static State s;
  return s;
}

void fail(const std::string &what) {
  if (state().error.empty())
    state().error = what;
}

bool inside(const void *p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  auto &a = state().allocations;
  auto it = a.upper_bound(v);
  if (it == a.begin())
    return false;
  --it;
  return v < it->first + it->second;
}

// llmc_topk_f32 on the fake device: no kernel computed the logits, so
// every token ties (scores of calloc'ed or arbitrary memory are not worth
// ranking): each row reports all `cols` tokens, the overflow the runtime
// answers by downloading the logits.
void fakeTopK(const llmc::abi::TopKArgs &a, unsigned grid) {
  if (a.rows <= 0 || a.cols <= 0 || a.k < 1 || a.k > 64 || grid != static_cast<unsigned>(a.rows))
    fail("llmc_topk_f32: bad rows, cols, k or grid");
  for (const void *p : {static_cast<const void *>(a.logits), static_cast<const void *>(a.scores),
                        static_cast<const void *>(a.ids), static_cast<const void *>(a.counts)})
    if (!inside(p))
      fail("llmc_topk_f32: an argument points outside every allocation");
  if (!inside(a.counts + a.rows - 1) || !inside(a.logits + int64_t{a.rows} * a.cols - 1))
    fail("llmc_topk_f32: counts or logits smaller than rows x cols");
  for (int r = 0; r < a.rows; ++r)
    a.counts[r] = a.cols;
}

void checkStepArgs(const std::string &name, const llmc::abi::StepArgs &a) {
  auto check = [&](const void *p, const char *field) {
    if (p != nullptr && !inside(p))
      fail(name + ": StepArgs." + field + " points outside every allocation");
  };
  for (int i = 0; i < 3; ++i)
    check(a.in[i], "in");
  check(a.out, "out");
  // The weight array (device memory the backend wrote at load) and each
  // weight address in it.
  if (a.numWeights < 0 || (a.numWeights > 0) != (a.w != nullptr))
    fail(name + ": StepArgs.w is " + (a.w ? "set" : "null") + " with numWeights " +
         std::to_string(a.numWeights));
  if (a.numWeights > 0 && (!inside(a.w) || !inside(a.w + a.numWeights - 1)))
    fail(name + ": StepArgs.w points outside every allocation");
  else
    for (int i = 0; i < a.numWeights; ++i)
      if (a.w[i] == nullptr || !inside(a.w[i]))
        fail(name + ": StepArgs.w[" + std::to_string(i) + "] points outside every allocation");
  check(a.kvKeys, "kvKeys");
  check(a.kvValues, "kvValues");
  check(a.positions, "positions");
  check(a.rowSequence, "rowSequence");
  check(a.seqFirstRow, "seqFirstRow");
  check(a.seqNumRows, "seqNumRows");
  check(a.blockTables, "blockTables");
  check(a.logitRows, "logitRows");
  check(a.workspace, "workspace");
  check(a.counters, "counters");
  check(a.errorFlag, "errorFlag");
  if (a.rows <= 0 || a.numLogitRows <= 0 || a.numLogitRows > a.rows)
    fail(name + ": rows " + std::to_string(a.rows) + ", logit rows " +
         std::to_string(a.numLogitRows));
  if (name.find("attention") != std::string::npos &&
      (a.kvKeys == nullptr || a.kvValues == nullptr || a.blockTableStride <= 0))
    fail(name + ": attention without its KV cache");
}

} // namespace

extern "C" {

// --- What the test reads. ---
const char *fakeCudaError() { return state().error.c_str(); }
long fakeCudaLaunches() { return state().launches; }
long fakeCudaGraphLaunches() { return state().graphLaunches; }
long fakeCudaGraphsCaptured() { return state().graphsCaptured; }
long fakeCudaLaunchesOf(const char *name) {
  auto it = state().launchesByName.find(name);
  return it == state().launchesByName.end() ? 0 : it->second;
}
// The weight count the last launch of step kernel `name` passed (-1: never launched).
int fakeCudaWeightsOf(const char *name) {
  auto it = state().weightsByName.find(name);
  return it == state().weightsByName.end() ? -1 : it->second;
}
// For the fake libcublasLt and the test: capture state and device memory.
int fakeCudaCapturing() { return state().capturing ? 1 : 0; }
// The base of the allocation holding `p` (0 when none).
uintptr_t fakeCudaAllocationBase(const void *p) {
  auto &a = state().allocations;
  auto it = a.upper_bound(reinterpret_cast<uintptr_t>(p));
  if (it == a.begin() || !inside(p))
    return 0;
  return (--it)->first;
}
// Whether [p, p + bytes) lies inside one allocation.
int fakeCudaInside(const void *p, size_t bytes) {
  uintptr_t base = fakeCudaAllocationBase(p);
  return base != 0 &&
         (bytes == 0 || fakeCudaAllocationBase(static_cast<const char *>(p) + bytes - 1) == base);
}

uint64_t fakeCudaLastWorkspaceBytes() { return state().lastWorkspaceBytes; }
// Faults to inject.
void fakeCudaSetDriverVersion(int version) { state().driverVersion = version; }
void fakeCudaFailAllocationsAbove(uint64_t bytes) { state().failAllocationsAbove = bytes; }
// Launches of `name` return `code` ("" stops); one inside a capture also
// invalidates it, as the driver does.
void fakeCudaFailLaunchesOf(const char *name, int code) {
  state().failLaunchOf = name;
  state().failLaunchCode = code;
}
// After a launch of `name` the next stream synchronization returns `code`
// (a fault inside the kernel, reported asynchronously).
void fakeCudaFailSyncAfter(const char *name, int code) {
  state().failSyncAfter = name;
  state().failSyncCode = code;
  state().syncFaultPending = false;
}

// --- The driver API subset of runtime/cuda/driver.cpp. ---
CUresult cuInit(unsigned) { return kOk; }
CUresult cuDriverGetVersion(int *v) { return *v = state().driverVersion, kOk; }
CUresult cuGetErrorName(CUresult error, const char **name) {
  switch (error) {
  case kOutOfMemory:
    return *name = "CUDA_ERROR_OUT_OF_MEMORY", kOk;
  case 700:
    return *name = "CUDA_ERROR_ILLEGAL_ADDRESS", kOk;
  case 701:
    return *name = "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", kOk;
  case kCaptureInvalidated:
    return *name = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", kOk;
  default:
    return *name = "CUDA_ERROR_FAKE", kOk;
  }
}
CUresult cuGetErrorString(CUresult, const char **text) { return *text = "fake driver", kOk; }
CUresult cuDeviceGetCount(int *count) { return *count = 1, kOk; }
CUresult cuDeviceGet(int *device, int ordinal) { return *device = ordinal, kOk; }
CUresult cuDeviceGetName(char *name, int length, int) {
  std::strncpy(name, "Fake H200", length);
  return kOk;
}
CUresult cuDeviceGetAttribute(int *value, int attribute, int) {
  switch (attribute) {
  case 16: // multiprocessors
    return *value = 132, kOk;
  case 75: // compute capability
    return *value = 9, kOk;
  case 76:
    return *value = 0, kOk;
  case 97: // opt-in shared memory per block
    return *value = 232448, kOk;
  default:
    return *value = 0, kOk;
  }
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, int) { return *bytes = state().total, kOk; }
CUresult cuDevicePrimaryCtxRetain(void **context, int) {
  static int context_;
  return *context = &context_, kOk;
}
CUresult cuDevicePrimaryCtxRelease_v2(int) { return kOk; }
CUresult cuCtxSetCurrent(void *) { return kOk; }
CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
  *total = state().total;
  *free = state().total - state().allocated;
  return kOk;
}
CUresult cuMemAlloc_v2(unsigned long long *pointer, size_t bytes) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().allocated + bytes > state().total ||
      (state().failAllocationsAbove > 0 && bytes > state().failAllocationsAbove))
    return kOutOfMemory;
  void *p = std::calloc(1, bytes); // untouched pages cost nothing
  if (p == nullptr)
    return kOutOfMemory;
  state().allocations[reinterpret_cast<uintptr_t>(p)] = bytes;
  state().allocated += bytes;
  *pointer = reinterpret_cast<uintptr_t>(p);
  return kOk;
}
CUresult cuMemFree_v2(unsigned long long pointer) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().allocations.find(pointer);
  if (it == state().allocations.end())
    return fail("cuMemFree of an unknown pointer"), kInvalidValue;
  state().allocated -= it->second;
  state().allocations.erase(it);
  std::free(reinterpret_cast<void *>(pointer));
  return kOk;
}
CUresult copy(void *dst, const void *src, size_t bytes, const char *what) {
  if (bytes > 0 && (!inside(dst) && !inside(src)))
    fail(std::string(what) + ": neither side is device memory");
  if (bytes > 0 && ((inside(dst) && !inside(static_cast<char *>(dst) + bytes - 1)) ||
                    (inside(src) && !inside(static_cast<const char *>(src) + bytes - 1))))
    fail(std::string(what) + ": runs past the end of an allocation");
  std::memcpy(dst, src, bytes);
  return kOk;
}
CUresult cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t bytes) {
  return copy(reinterpret_cast<void *>(dst), src, bytes, "cuMemcpyHtoD");
}
CUresult cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t bytes) {
  return copy(dst, reinterpret_cast<const void *>(src), bytes, "cuMemcpyDtoH");
}
CUresult cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src, size_t bytes, void *) {
  return cuMemcpyHtoD_v2(dst, src, bytes);
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, unsigned long long src, size_t bytes, void *) {
  return cuMemcpyDtoH_v2(dst, src, bytes);
}
CUresult cuMemcpyDtoDAsync_v2(unsigned long long dst, unsigned long long src, size_t bytes,
                              void *) {
  return copy(reinterpret_cast<void *>(dst), reinterpret_cast<const void *>(src), bytes,
              "cuMemcpyDtoD");
}
CUresult cuMemsetD8Async(unsigned long long dst, unsigned char value, size_t bytes, void *) {
  if (!inside(reinterpret_cast<void *>(dst)) || !inside(reinterpret_cast<char *>(dst) + bytes - 1))
    fail("cuMemsetD8Async outside an allocation");
  std::memset(reinterpret_cast<void *>(dst), value, bytes);
  return kOk;
}
CUresult cuStreamCreate(void **stream, unsigned) {
  static int stream_;
  return *stream = &stream_, kOk;
}
CUresult cuStreamDestroy_v2(void *) { return kOk; }
CUresult cuStreamSynchronize(void *) {
  if (!state().syncFaultPending)
    return kOk;
  state().syncFaultPending = false;
  return state().failSyncCode;
}
CUresult cuModuleLoadDataEx(void **module, const void *image, unsigned, int *, void **) {
  static int module_;
  if (image == nullptr)
    return kInvalidValue;
  return *module = &module_, kOk;
}
CUresult cuModuleUnload(void *) { return kOk; }
CUresult cuModuleGetFunction(void **function, void *, const char *name) {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().functions.push_back(name);
  *function = reinterpret_cast<void *>(state().functions.size());
  return kOk;
}
CUresult cuFuncSetAttribute(void *, int, int value) { return value > 232448 ? kInvalidValue : kOk; }
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, void *, void **params, void **) {
  std::lock_guard<std::mutex> lock(state().mutex);
  size_t index = reinterpret_cast<size_t>(f);
  if (index == 0 || index > state().functions.size())
    return fail("cuLaunchKernel of an unknown function"), kNotFound;
  const std::string &name = state().functions[index - 1];
  if (gx == 0 || gy == 0 || gz == 0 || gy > 65535 || gz > 65535 || bx * by * bz > 1024 ||
      bx * by * bz == 0 || shared > 232448)
    fail(name + ": bad launch shape");
  if (!state().failLaunchOf.empty() && name == state().failLaunchOf) {
    state().captureInvalid |= state().capturing;
    return state().failLaunchCode;
  }
  if (!state().failSyncAfter.empty() && name == state().failSyncAfter)
    state().syncFaultPending = true;
  bool step = name.rfind("llmc_synthetic_fill_", 0) != 0 && name != "llmc_argmax_f32" &&
              name != llmc::abi::kTopKKernel;
  if (step) {
    const auto &args = *static_cast<const llmc::abi::StepArgs *>(params[0]);
    checkStepArgs(name, args);
    state().weightsByName[name] = args.numWeights;
    auto it = state().allocations.upper_bound(reinterpret_cast<uintptr_t>(args.workspace));
    if (it != state().allocations.begin() && inside(args.workspace))
      state().lastWorkspaceBytes = (--it)->second;
  }
  if (name == llmc::abi::kTopKKernel)
    fakeTopK(*static_cast<const llmc::abi::TopKArgs *>(params[0]), gx);
  ++(state().capturing ? state().capturedLaunches : state().launches);
  ++state().launchesByName[name];
  return kOk;
}
CUresult cuStreamBeginCapture_v2(void *, int) {
  state().capturing = true;
  state().captureInvalid = false;
  state().capturedLaunches = 0;
  return kOk;
}
CUresult cuStreamEndCapture(void *, void **graph) {
  static int graph_;
  state().capturing = false;
  if (state().captureInvalid)
    return *graph = nullptr, kCaptureInvalidated;
  ++state().graphsCaptured;
  return *graph = &graph_, kOk;
}
CUresult cuGraphInstantiateWithFlags(void **exec, void *, unsigned long long) {
  static int exec_;
  return *exec = &exec_, kOk;
}
CUresult cuGraphLaunch(void *, void *) { return ++state().graphLaunches, kOk; }
CUresult cuGraphExecDestroy(void *) { return kOk; }
CUresult cuGraphDestroy(void *) { return kOk; }
CUresult cuEventCreate(void **event, unsigned) {
  static int event_;
  return *event = &event_, kOk;
}
CUresult cuEventDestroy_v2(void *) { return kOk; }
CUresult cuEventRecord(void *, void *) { return kOk; }
CUresult cuEventSynchronize(void *) { return kOk; }
CUresult cuEventElapsedTime_v2(float *ms, void *, void *) { return *ms = 0.25f, kOk; }

} // extern "C"
