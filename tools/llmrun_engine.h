// Loading an engine for the llmrun commands, with the one-line notices a user
// should see (CPU backend in use, synthetic weights).
#pragma once

#include "engine/engine.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>

namespace llmc {

struct EngineFlags {
  int threads = 0;
  bool noVerify = false;
  std::string device = "auto";

  void add(CLI::App &command) {
    command.add_option("--threads", threads, "CPU threads (default: all cores)");
    command.add_flag("--no-verify", noVerify,
                     "Skip the weight checksum at load (large plans load faster)");
    command.add_option("--device", device, "auto, cpu or cuda")
        ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  }
};

// Loads the plan; prints which backend runs it on stderr unless quiet.
inline Expected<std::unique_ptr<Engine>> loadEngine(const std::string &plan,
                                                    const EngineFlags &flags,
                                                    int64_t maxSequences, bool quiet = false) {
  if (flags.device == "cuda")
    return Status::error("--device cuda: this llmrun has no CUDA backend yet; use --device cpu");
  EngineOptions options;
  options.threads = flags.threads;
  options.verifyWeights = !flags.noVerify;
  options.maxSequences = maxSequences;
  LLMC_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::load(plan, options));
  if (!quiet) {
    std::fprintf(stderr, "llmrun: running on the CPU backend (%d threads)%s\n", engine->threads(),
                 flags.device == "auto" ? "; no CUDA backend in this build" : "");
    if (engine->synthetic())
      std::fprintf(stderr, "llmrun: this plan has synthetic weights (seed %llu): the text is "
                           "meaningless; use it for speed, not quality\n",
                   static_cast<unsigned long long>(engine->plan().meta().synthetic_seed()));
  }
  return engine;
}

} // namespace llmc
