#include "cuda/driver.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <mutex>

namespace llmc::cuda {
namespace {

// Resolves the first of `names` the library exports.
template <typename Fn>
bool resolve(void *library, Fn &slot, std::initializer_list<const char *> names,
             std::string &missing) {
  for (const char *name : names)
    if (void *symbol = dlsym(library, name)) {
      slot = reinterpret_cast<Fn>(symbol);
      return true;
    }
  missing = *names.begin();
  return false;
}

Status resolveAll(void *library, DriverApi &a) {
  std::string missing;
  bool ok = resolve(library, a.init, {"cuInit"}, missing) &&
            resolve(library, a.driverGetVersion, {"cuDriverGetVersion"}, missing) &&
            resolve(library, a.getErrorName, {"cuGetErrorName"}, missing) &&
            resolve(library, a.getErrorString, {"cuGetErrorString"}, missing) &&
            resolve(library, a.deviceGetCount, {"cuDeviceGetCount"}, missing) &&
            resolve(library, a.deviceGet, {"cuDeviceGet"}, missing) &&
            resolve(library, a.deviceGetName, {"cuDeviceGetName"}, missing) &&
            resolve(library, a.deviceGetAttribute, {"cuDeviceGetAttribute"}, missing) &&
            resolve(library, a.deviceTotalMem, {"cuDeviceTotalMem_v2"}, missing) &&
            resolve(library, a.devicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"}, missing) &&
            resolve(library, a.devicePrimaryCtxRelease,
                    {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}, missing) &&
            resolve(library, a.ctxSetCurrent, {"cuCtxSetCurrent"}, missing) &&
            resolve(library, a.memGetInfo, {"cuMemGetInfo_v2"}, missing) &&
            resolve(library, a.memAlloc, {"cuMemAlloc_v2"}, missing) &&
            resolve(library, a.memFree, {"cuMemFree_v2"}, missing) &&
            resolve(library, a.memcpyHtoD, {"cuMemcpyHtoD_v2"}, missing) &&
            resolve(library, a.memcpyDtoH, {"cuMemcpyDtoH_v2"}, missing) &&
            resolve(library, a.memcpyHtoDAsync, {"cuMemcpyHtoDAsync_v2"}, missing) &&
            resolve(library, a.memcpyDtoHAsync, {"cuMemcpyDtoHAsync_v2"}, missing) &&
            resolve(library, a.memsetD8Async, {"cuMemsetD8Async"}, missing) &&
            resolve(library, a.memcpyDtoDAsync, {"cuMemcpyDtoDAsync_v2"}, missing) &&
            resolve(library, a.streamCreate, {"cuStreamCreate"}, missing) &&
            resolve(library, a.streamDestroy, {"cuStreamDestroy_v2"}, missing) &&
            resolve(library, a.streamSynchronize, {"cuStreamSynchronize"}, missing) &&
            resolve(library, a.moduleLoadDataEx, {"cuModuleLoadDataEx"}, missing) &&
            resolve(library, a.moduleUnload, {"cuModuleUnload"}, missing) &&
            resolve(library, a.moduleGetFunction, {"cuModuleGetFunction"}, missing) &&
            resolve(library, a.funcSetAttribute, {"cuFuncSetAttribute"}, missing) &&
            resolve(library, a.launchKernel, {"cuLaunchKernel"}, missing) &&
            resolve(library, a.streamBeginCapture, {"cuStreamBeginCapture_v2"}, missing) &&
            resolve(library, a.streamEndCapture, {"cuStreamEndCapture"}, missing) &&
            resolve(library, a.graphInstantiate, {"cuGraphInstantiateWithFlags"}, missing) &&
            resolve(library, a.graphLaunch, {"cuGraphLaunch"}, missing) &&
            resolve(library, a.graphExecDestroy, {"cuGraphExecDestroy"}, missing) &&
            resolve(library, a.graphDestroy, {"cuGraphDestroy"}, missing) &&
            resolve(library, a.eventCreate, {"cuEventCreate"}, missing) &&
            resolve(library, a.eventDestroy, {"cuEventDestroy_v2", "cuEventDestroy"}, missing) &&
            resolve(library, a.eventRecord, {"cuEventRecord"}, missing) &&
            resolve(library, a.eventSynchronize, {"cuEventSynchronize"}, missing) &&
            resolve(library, a.eventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"},
                    missing);
  if (!ok)
    return Status::error("the CUDA driver library lacks " + missing +
                         " (driver too old for this llmrun; CUDA 12 or newer is needed)");
  return Status::ok();
}

struct Loaded {
  Driver *driver = nullptr;
  Status status;
};

} // namespace

Expected<const Driver *> Driver::load() {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] {
    std::string tried, opened;
    void *library = nullptr;
    const char *override = std::getenv("LLMC_LIBCUDA");
    for (const char *name : {override, "libcuda.so.1", "libcuda.so"}) {
      if (name == nullptr || *name == '\0')
        continue;
      library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (library != nullptr) {
        opened = name;
        break;
      }
      const char *why = dlerror();
      if (tried.empty()) // the first failure says it best
        tried = why ? why : name;
      if (override != nullptr && name == override)
        break; // an explicit library is the only one tried
    }
    if (library == nullptr) {
      loaded.status = Status::error("no NVIDIA driver: " + tried);
      return;
    }
    auto *driver = new Driver(); // process lifetime: the library is never closed
    driver->path_ = opened;
    loaded.status = resolveAll(library, driver->api_);
    if (loaded.status)
      loaded.driver = driver;
  });
  if (!loaded.status)
    return loaded.status;
  return static_cast<const Driver *>(loaded.driver);
}

Status checkCall(CUresult result, const char *call, const char *file, int line) {
  if (result == kCudaSuccess)
    return Status::ok();
  const char *name = "unknown error", *text = "";
  if (auto driver = Driver::load()) {
    (*driver)->api().getErrorName(result, &name);
    (*driver)->api().getErrorString(result, &text);
  }
  const char *base = std::strstr(file, "runtime/");
  return Status::error(std::string("CUDA call ") + call + " failed: " + (name ? name : "?") + " (" +
                       (text ? text : "") + ") at " + (base ? base : file) + ":" +
                       std::to_string(line));
}

} // namespace llmc::cuda
