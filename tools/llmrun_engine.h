// Loading an engine for the llmrun commands, with the one-line notices a user
// should see (CPU backend in use, synthetic weights).
#pragma once

#include "cli_common.h"
#include "engine/engine.h"
#include "support/thread_pool.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

namespace llmc {

// More threads than cores only make them wait for each other at every step:
// --threads is capped to the cores this process may run on, with a warning.
// The warning is printed once: parseArgs runs an option's validators twice
// (its argument check before CLI11's parse, then the parse).
inline std::string capThreadsToCores(const std::string &value) {
  const int cores = availableCores();
  if (std::stoll(value) <= cores)
    return value;
  static std::once_flag warned;
  std::call_once(warned, [&] {
    std::fprintf(stderr,
                 "warning: --threads %s is more than the %d cores this process may run on; "
                 "using %d\n",
                 value.c_str(), cores, cores);
  });
  return std::to_string(cores);
}

struct EngineFlags {
  int threads = 0;
  bool noVerify = false;
  std::string device = "auto";
  double gpuMemoryFraction = 0.9;
  bool noCudaGraphs = false;
  bool noCublasLt = false;
  std::string kvCacheDtype = "auto";

  void add(CLI::App &command) {
    command.add_option("-t,--threads", threads, "CPU threads (default: all cores)")
        ->check(CLI::Range(0, 4096))
        ->transform(capThreadsToCores);
    command.add_flag("--no-verify", noVerify,
                     "Skip the weight checksum at load (large plans load faster)");
    command.add_option("--device", device, "auto (a GPU when one can run the plan, else the CPU), "
                                           "cpu or cuda")
        ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
    command
        .add_option("--kv-cache-dtype", kvCacheDtype,
                    "KV cache element type: auto (f32 on the CPU, the plan's on the GPU), "
                    "f32, or f16 (half the memory and the bytes a long-context step reads, "
                    "K and V rounded to f16; the CPU backend)")
        ->check(CLI::IsMember({"auto", "f32", "f16"}));
    command.add_option("--gpu-memory-fraction", gpuMemoryFraction,
                       "Share of the GPU's memory for weights, activations and the KV cache "
                       "(default 0.9)")
        ->check(CLI::Range(0.01, 1.0));
    command.add_flag("--no-cuda-graphs", noCudaGraphs, "Launch decode steps one kernel at a time");
    command.add_flag("--no-cublaslt", noCublasLt,
                     "Run every GEMM on llmc's kernels, none on cuBLASLt (plain bf16 GEMMs use "
                     "cuBLASLt by default when it loads)");
  }

  // The engine options these flags set (sizes of the KV pool aside).
  EngineOptions options() const {
    EngineOptions o;
    o.device = device;
    o.gpuMemoryFraction = gpuMemoryFraction;
    o.cudaGraphs = !noCudaGraphs;
    o.cublasLt = !noCublasLt;
    o.threads = threads;
    o.verifyWeights = !noVerify;
    o.kvCacheDtype = kvCacheDtype;
    return o;
  }
};

// Loads the plan; prints which backend runs it on stderr at Info level (one
// line), and that its weights are synthetic. kvCacheTokens: 0 for the
// plan's max_seq_len per sequence.
inline Expected<std::unique_ptr<Engine>> loadEngine(const std::string &plan,
                                                    const EngineFlags &flags,
                                                    int64_t maxSequences,
                                                    cli::LogLevel level = cli::LogLevel::Info,
                                                    int64_t kvCacheTokens = 0) {
  EngineOptions options = flags.options();
  options.maxSequences = maxSequences;
  options.kvCacheTokens = kvCacheTokens;
  LLMC_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::load(plan, options));
  if (level >= cli::LogLevel::Info) {
    if (!engine->backendNotice().empty())
      std::fprintf(stderr, "llmrun: %s (%d threads)\n", engine->backendNotice().c_str(),
                   engine->threads());
    else
      std::fprintf(stderr, "llmrun: running on %s\n", engine->backend().description().c_str());
  }
  if (level >= cli::LogLevel::Warning && engine->synthetic())
    std::fprintf(stderr, "llmrun: this plan has synthetic weights (seed %llu): the text is "
                         "meaningless; use it for speed, not quality\n",
                 static_cast<unsigned long long>(engine->plan().meta().synthetic_seed()));
  return engine;
}

// The old form: quiet prints nothing.
inline Expected<std::unique_ptr<Engine>> loadEngine(const std::string &plan,
                                                    const EngineFlags &flags,
                                                    int64_t maxSequences, bool quiet) {
  return loadEngine(plan, flags, maxSequences, quiet ? cli::LogLevel::Error : cli::LogLevel::Info);
}

} // namespace llmc
