#include "cuda/device.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <utility>

namespace llmc::cuda {
namespace {

const DriverApi *loadedApi() {
  auto driver = Driver::load();
  return driver ? &(*driver)->api() : nullptr;
}

} // namespace

DeviceBuffer::DeviceBuffer(DeviceBuffer &&other) noexcept
    : pointer_(std::exchange(other.pointer_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
  if (this != &other) {
    this->~DeviceBuffer();
    pointer_ = std::exchange(other.pointer_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (pointer_ != 0)
    if (const DriverApi *cu = loadedApi())
      cu->memFree(pointer_);
  pointer_ = 0;
  bytes_ = 0;
}

Module::Module(Module &&other) noexcept : module_(std::exchange(other.module_, nullptr)) {}

Module &Module::operator=(Module &&other) noexcept {
  if (this != &other) {
    this->~Module();
    module_ = std::exchange(other.module_, nullptr);
  }
  return *this;
}

Module::~Module() {
  if (module_ != nullptr)
    if (const DriverApi *cu = loadedApi())
      cu->moduleUnload(module_);
  module_ = nullptr;
}

Expected<CUfunction> Module::function(const std::string &name) const {
  const DriverApi &cu = *loadedApi();
  CUfunction f = nullptr;
  Status status = checkCall(cu.moduleGetFunction(&f, module_, name.c_str()), "cuModuleGetFunction",
                            __FILE__, __LINE__);
  if (!status)
    return status.withContext("kernel '" + name + "'");
  return f;
}

std::string Device::unavailableReason() {
  auto driver = Driver::load();
  if (!driver)
    return driver.message();
  const DriverApi &cu = (*driver)->api();
  CUresult init = cu.init(0);
  if (init == kCudaErrorNoDevice)
    return "the NVIDIA driver reports no CUDA device";
  if (init != kCudaSuccess)
    return checkCall(init, "cuInit(0)", __FILE__, __LINE__).message();
  int count = 0;
  if (cu.deviceGetCount(&count) != kCudaSuccess || count == 0)
    return "the NVIDIA driver reports no CUDA device";
  return "";
}

Expected<std::unique_ptr<Device>> Device::open(int ordinal) {
  if (std::string why = unavailableReason(); !why.empty())
    return Status::error(why);
  std::unique_ptr<Device> d(new Device());
  d->api_ = loadedApi();
  const DriverApi &cu = *d->api_;
  int count = 0;
  LLMC_CU(cu.deviceGetCount(&count));
  if (ordinal < 0 || ordinal >= count)
    return Status::error("CUDA device " + std::to_string(ordinal) + " does not exist (" +
                         std::to_string(count) + " found)");
  LLMC_CU(cu.deviceGet(&d->device_, ordinal));
  DeviceInfo &info = d->info_;
  info.ordinal = ordinal;
  char name[256] = {};
  LLMC_CU(cu.deviceGetName(name, sizeof(name) - 1, d->device_));
  info.name = name;
  LLMC_CU(cu.deviceGetAttribute(&info.major, kAttrComputeCapabilityMajor, d->device_));
  LLMC_CU(cu.deviceGetAttribute(&info.minor, kAttrComputeCapabilityMinor, d->device_));
  LLMC_CU(cu.deviceGetAttribute(&info.multiprocessors, kAttrMultiprocessorCount, d->device_));
  LLMC_CU(cu.deviceGetAttribute(&info.maxSharedPerBlock, kAttrMaxSharedMemoryPerBlockOptin,
                                d->device_));
  LLMC_CU(cu.driverGetVersion(&info.driverVersion));
  size_t total = 0;
  LLMC_CU(cu.deviceTotalMem(&total, d->device_));
  info.totalBytes = total;
  LLMC_CU(cu.devicePrimaryCtxRetain(&d->context_, d->device_));
  LLMC_CU(cu.ctxSetCurrent(d->context_));
  LLMC_CU(cu.streamCreate(&d->stream_, kStreamNonBlocking));
  return d;
}

Device::~Device() {
  if (api_ == nullptr)
    return;
  if (stream_ != nullptr) {
    api_->streamSynchronize(stream_);
    api_->streamDestroy(stream_);
  }
  if (context_ != nullptr)
    api_->devicePrimaryCtxRelease(device_);
}

Status Device::memoryInfo(uint64_t *freeBytes, uint64_t *totalBytes) const {
  const DriverApi &cu = *api_;
  size_t f = 0, t = 0;
  LLMC_CU(cu.memGetInfo(&f, &t));
  *freeBytes = f;
  *totalBytes = t;
  return Status::ok();
}

Expected<DeviceBuffer> Device::allocate(uint64_t bytes) {
  const DriverApi &cu = *api_;
  DeviceBuffer buffer;
  Status status = checkCall(cu.memAlloc(&buffer.pointer_, bytes == 0 ? 256 : bytes), "cuMemAlloc",
                            __FILE__, __LINE__);
  if (!status)
    return status.withContext("allocating " + std::to_string(bytes) + " bytes on " + info_.name);
  buffer.bytes_ = bytes;
  return buffer;
}

Status Device::upload(CUdeviceptr dst, const void *src, uint64_t bytes) {
  const DriverApi &cu = *api_;
  LLMC_CU(cu.streamSynchronize(stream_));
  LLMC_CU(cu.memcpyHtoD(dst, src, bytes));
  return Status::ok();
}

Status Device::download(void *dst, CUdeviceptr src, uint64_t bytes) {
  const DriverApi &cu = *api_;
  LLMC_CU(cu.streamSynchronize(stream_));
  LLMC_CU(cu.memcpyDtoH(dst, src, bytes));
  return Status::ok();
}

Status Device::uploadAsync(CUdeviceptr dst, const void *src, uint64_t bytes) {
  const DriverApi &cu = *api_;
  LLMC_CU(cu.memcpyHtoDAsync(dst, src, bytes, stream_));
  return Status::ok();
}

Status Device::downloadAsync(void *dst, CUdeviceptr src, uint64_t bytes) {
  const DriverApi &cu = *api_;
  LLMC_CU(cu.memcpyDtoHAsync(dst, src, bytes, stream_));
  return Status::ok();
}

Status Device::zeroAsync(CUdeviceptr dst, uint64_t bytes) {
  const DriverApi &cu = *api_;
  LLMC_CU(cu.memsetD8Async(dst, 0, bytes, stream_));
  return Status::ok();
}

Status Device::synchronize() {
  const DriverApi &cu = *api_;
  LLMC_CU(cu.streamSynchronize(stream_));
  return Status::ok();
}

Expected<Module> Device::loadModule(const uint8_t *image, size_t size, const std::string &what) {
  const DriverApi &cu = *api_;
  // The image sits at any offset of the plan's metadata: give the driver an
  // aligned copy.
  std::vector<uint64_t> aligned((size + 7) / 8 + 1, 0);
  std::memcpy(aligned.data(), image, size);
  std::vector<char> log(16384, '\0');
  int options[] = {kJitErrorLogBuffer, kJitErrorLogBufferSizeBytes};
  void *values[] = {log.data(), reinterpret_cast<void *>(log.size() - 1)};
  Module module;
  CUresult result = cu.moduleLoadDataEx(&module.module_, aligned.data(), 2, options, values);
  if (result != kCudaSuccess) {
    Status status = checkCall(result, "cuModuleLoadDataEx", __FILE__, __LINE__);
    return Status::error(what + ": " + status.message() +
                         (log[0] != '\0' ? std::string("\n") + log.data() : ""));
  }
  return module;
}

Status Device::launch(CUfunction f, const uint32_t grid[3], const uint32_t block[3],
                      uint32_t sharedBytes, const void *args) {
  const DriverApi &cu = *api_;
  void *params[] = {const_cast<void *>(args)};
  LLMC_CU(cu.launchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], sharedBytes,
                          stream_, params, nullptr));
  return Status::ok();
}

std::string cudaVersionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

int ptxIsaDriverVersion(const char *ptx, size_t size) {
  const std::string_view text(ptx, size);
  size_t at = text.find(".version ");
  if (at == std::string_view::npos)
    return 0;
  int major = 0, minor = 0;
  std::string line(text.substr(at + 9, std::min<size_t>(16, text.size() - at - 9)));
  if (std::sscanf(line.c_str(), "%d.%d", &major, &minor) != 2)
    return 0;
  // PTX ISA 9.x came with CUDA 13.x; 8.0-8.5 with 12.0-12.5 (8.5 also 12.6),
  // 8.6-8.8 with 12.7-12.9; 7.x with 11.x.
  if (major >= 9)
    return 13000 + (major - 9) * 1000 + minor * 10;
  if (major == 8)
    return 12000 + (minor <= 5 ? minor : minor + 1) * 10;
  if (major == 7)
    return 11000 + minor * 10;
  return 10000;
}

int moduleDriverVersion(fb::Target target, const uint8_t *image, size_t size, int cudaVersion) {
  if (target == fb::Target::Ptx)
    return ptxIsaDriverVersion(reinterpret_cast<const char *>(image), size);
  return cudaVersion > 0 ? cudaVersion / 1000 * 1000 : 13000;
}

fb::Target pickTarget(const DeviceInfo &info, bool hasSm90a, bool hasPtx) {
  if (hasSm90a && info.major == 9 && info.minor == 0)
    return fb::Target::Sm90a;
  if (hasPtx && info.major >= 8)
    return fb::Target::Ptx;
  return fb::Target::Cpu;
}

} // namespace llmc::cuda
