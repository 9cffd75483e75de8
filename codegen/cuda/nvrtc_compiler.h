// Compiles generated kernel instances with NVRTC, caches the results by a
// hash of their source, and links one module per GPU target:
//   sm_90a: each instance -> relocatable cubin (NVRTC runs ptxas; its -v
//           report gives registers and spills), then nvJitLink -> one cubin;
//   ptx:    each instance -> PTX for compute_80, merged into one PTX text
//           that the driver JIT-compiles on any sm_80+ GPU.
// The cache lives in $LLMC_CACHE_DIR, else $XDG_CACHE_HOME/llmc, else
// ~/.cache/llmc; its key is the SHA-256 of everything a compilation depends
// on (the full source, the embedded headers, the options, the NVRTC
// version), and each entry stores that material and the digests of its
// files: a hit is checked byte for byte, so a key collision, another
// kernel's entry or a corrupt file recompiles (and rewrites the entry).
#pragma once

#include "cuda/kernel_gen.h"
#include "schema/engine_generated.h"
#include "support/status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace llmc::cuda {

// The ptxas resource report of one kernel (sm_90a only; -1 when unknown).
struct ResourceUsage {
  int registers = -1;
  int stackBytes = -1;
  int spillStoreBytes = -1;
  int spillLoadBytes = -1;
  bool spills() const { return spillStoreBytes > 0 || spillLoadBytes > 0; }
};

struct CompiledKernel {
  std::string name;
  std::vector<uint8_t> image; // relocatable cubin (Sm90a) or PTX text (Ptx, no NUL)
  std::string log;            // NVRTC + ptxas log
  ResourceUsage usage;
  bool fromCache = false;
};

struct CompileOptions {
  std::string cacheDir; // "" = defaultCacheDir(); "-" disables the cache
  int threads = 0;      // 0: all cores
  // Called after each kernel, from any thread (calls are serialized).
  std::function<void(size_t done, size_t total)> progress;
};

// $LLMC_CACHE_DIR, else $XDG_CACHE_HOME/llmc, else $HOME/.cache/llmc.
std::string defaultCacheDir();

// "13.0": the NVRTC this compiler was built with.
std::string nvrtcVersionString();
// The same as 1000 * major + 10 * minor (13000), as cuDriverGetVersion counts.
int nvrtcVersionNumber();

// Compiles one instance for `target` (Sm90a or Ptx). Errors name the kernel
// and carry NVRTC's log.
Expected<CompiledKernel> compileKernel(const KernelInstance &kernel, fb::Target target,
                                       const std::string &cacheDir);

// Compiles every instance (in parallel, through the cache), in order.
Expected<std::vector<CompiledKernel>> compileKernels(const std::vector<KernelInstance> &kernels,
                                                     fb::Target target,
                                                     const CompileOptions &options);

// Links compiled instances into one module image: a cubin for Sm90a, a
// NUL-terminated PTX text for Ptx.
Expected<std::vector<uint8_t>> linkModule(const std::vector<CompiledKernel> &kernels,
                                          fb::Target target);

// Merges PTX texts of separate compilations into one module: one header,
// each global declaration once (identical duplicates dropped, e.g. the
// math library's tables), every function. Fails on two different
// definitions of one name.
Expected<std::string> mergePtx(const std::vector<std::string> &modules);

// Parses ptxas -v output for `kernel`.
ResourceUsage parsePtxasReport(const std::string &log, const std::string &kernel);

} // namespace llmc::cuda
