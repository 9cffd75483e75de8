// One CUDA device as the backend and the GPU tests use it: the primary
// context, one stream, device memory, modules and launches, all through
// the dlopen'ed driver (cuda/driver.h). Not thread-safe: one engine drives
// one device from one thread.
#pragma once

#include "cuda/driver.h"
#include "schema/engine_generated.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace llmc::cuda {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int major = 0, minor = 0; // compute capability
  int multiprocessors = 0;
  int maxSharedPerBlock = 0; // opt-in limit, bytes
  uint64_t totalBytes = 0;
  int driverVersion = 0; // cuDriverGetVersion: 1000 * major + 10 * minor (13000 = CUDA 13.0)
};

// "13.0" for 13000.
std::string cudaVersionText(int version);
// The CUDA driver version that the PTX text's ISA (its .version line)
// needs, e.g. 13000 for ISA 9.0, 12080 for 8.7; 0 when it has no .version.
int ptxIsaDriverVersion(const char *ptx, size_t size);
// The driver version a module of a plan needs: a cubin the major version of
// the CUDA that compiled it (minor-version compatibility; `cudaVersion` 0,
// from older plans: 13.0, the toolkit llmc builds with), PTX its ISA's.
int moduleDriverVersion(fb::Target target, const uint8_t *image, size_t size, int cudaVersion);
// The driver version libcublasLt.so.13 needs.
inline constexpr int kCublasLtDriverVersion = 13000;

// Device memory, freed on destruction.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer &&other) noexcept;
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer();

  CUdeviceptr get() const { return pointer_; }
  uint64_t bytes() const { return bytes_; }

private:
  friend class Device;
  CUdeviceptr pointer_ = 0;
  uint64_t bytes_ = 0;
};

// A loaded module and its functions by name.
class Module {
public:
  Module() = default;
  Module(Module &&other) noexcept;
  Module &operator=(Module &&other) noexcept;
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;
  ~Module();

  Expected<CUfunction> function(const std::string &name) const;

private:
  friend class Device;
  CUmodule module_ = nullptr;
};

class Device {
public:
  // Why no device can be used: "" when one can. Cheap; loads the driver.
  static std::string unavailableReason();

  // Opens device `ordinal`: driver, primary context (made current), stream.
  static Expected<std::unique_ptr<Device>> open(int ordinal = 0);
  ~Device();

  const DeviceInfo &info() const { return info_; }
  CUstream stream() const { return stream_; }
  const DriverApi &api() const { return *api_; }

  // Bytes free and total on the device now.
  Status memoryInfo(uint64_t *freeBytes, uint64_t *totalBytes) const;
  Expected<DeviceBuffer> allocate(uint64_t bytes);
  // Synchronous copies (the stream is drained first).
  Status upload(CUdeviceptr dst, const void *src, uint64_t bytes);
  Status download(void *dst, CUdeviceptr src, uint64_t bytes);
  // Stream-ordered.
  Status uploadAsync(CUdeviceptr dst, const void *src, uint64_t bytes);
  Status downloadAsync(void *dst, CUdeviceptr src, uint64_t bytes);
  Status zeroAsync(CUdeviceptr dst, uint64_t bytes);
  Status synchronize();

  // Loads a cubin or NUL-terminated PTX; a JIT failure carries the
  // driver's log.
  Expected<Module> loadModule(const uint8_t *image, size_t size, const std::string &what);

  // Launches `f` on the stream with one by-value parameter struct.
  Status launch(CUfunction f, const uint32_t grid[3], const uint32_t block[3], uint32_t sharedBytes,
                const void *args);

private:
  Device() = default;
  const DriverApi *api_ = nullptr;
  DeviceInfo info_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
};

// The GPU target whose module suits a device: Sm90a for compute capability
// 9.0 when the plan has it, else Ptx on 8.0 or newer; Cpu when neither fits.
fb::Target pickTarget(const DeviceInfo &info, bool hasSm90a, bool hasPtx);

} // namespace llmc::cuda
