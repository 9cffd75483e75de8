// llmc: the ahead-of-time compiler. `llmc build MODEL -o engine.plan`.
#include "cli_common.h"
#include "driver/build.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <unistd.h>

#ifndef LLMC_VERSION
#define LLMC_VERSION "0.0.0"
#endif

namespace {

// Prints a weight-writing progress bar on a terminal, else a line every 25%.
class ProgressPrinter {
public:
  void operator()(uint64_t done, uint64_t total) {
    if (total == 0)
      return;
    int percent = static_cast<int>(done * 100 / total);
    if (isatty(STDERR_FILENO)) {
      if (percent == lastPercent_)
        return;
      int filled = percent / 4;
      std::fprintf(stderr, "\rllmc: writing weights [%.*s%*s] %3d%% (%.1f / %.1f MiB)", filled,
                   "#########################", 25 - filled, "", percent, done / 1048576.0,
                   total / 1048576.0);
      if (done == total)
        std::fprintf(stderr, "\n");
    } else if (percent / 25 != lastPercent_ / 25 || done == total) {
      std::fprintf(stderr, "llmc: writing weights %3d%% (%.1f / %.1f MiB)\n", percent,
                   done / 1048576.0, total / 1048576.0);
    }
    lastPercent_ = percent;
  }

private:
  int lastPercent_ = -1;
};

// GPU kernel compilation: a bar on a terminal, else the last line only.
void printCompileProgress(size_t done, size_t total) {
  if (isatty(STDERR_FILENO)) {
    int filled = static_cast<int>(done * 25 / total);
    std::fprintf(stderr, "\rllmc: compiling kernels [%.*s%*s] %zu/%zu", filled,
                 "#########################", 25 - filled, "", done, total);
    if (done == total)
      std::fprintf(stderr, "\n");
  } else if (done == total) {
    std::fprintf(stderr, "llmc: compiled %zu kernels\n", total);
  }
}

// Quantize-stage work (calibration, AWQ search, packing): a bar with an ETA
// from the task's elapsed time on a terminal, else a line when a task ends.
class TaskProgressPrinter {
public:
  void operator()(const std::string &task, uint64_t done, uint64_t total) {
    auto now = std::chrono::steady_clock::now();
    if (task != task_ || done == 0) {
      task_ = task;
      start_ = now;
      lastDraw_ = now - std::chrono::seconds(1);
    }
    double elapsed = std::chrono::duration<double>(now - start_).count();
    if (!isatty(STDERR_FILENO)) {
      if (done == total)
        std::fprintf(stderr, "llmc: %s: %llu/%llu in %.1f s\n", task.c_str(),
                     static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
                     elapsed);
      return;
    }
    if (done != total && now - lastDraw_ < std::chrono::milliseconds(100))
      return;
    lastDraw_ = now;
    int filled = total > 0 ? static_cast<int>(done * 25 / total) : 25;
    char eta[32] = "";
    if (done > 0 && done < total)
      std::snprintf(eta, sizeof(eta), ", ETA %.0f s", elapsed * (total - done) / done);
    std::fprintf(stderr, "\rllmc: %-12s [%.*s%*s] %llu/%llu, %.0f s%s   ", task.c_str(), filled,
                 "#########################", 25 - filled, "",
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
                 elapsed, eta);
    if (done == total)
      std::fprintf(stderr, "\n");
  }

private:
  std::string task_;
  std::chrono::steady_clock::time_point start_, lastDraw_;
};

// What llmc printed on stdout (IR, --help, --version) must have arrived: a
// full disk or closed pipe is an error, not exit 0 with the output lost.
int checkStdout(int code) {
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "error: cannot write to standard output: %s\n", std::strerror(errno));
    return code == 0 ? 1 : code;
  }
  return code;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"llmc: compile a language model into an engine plan"};
  app.name("llmc");
  app.set_version_flag("--version", std::string("llmc ") + LLMC_VERSION);
  app.require_subcommand(1);

  llmc::BuildOptions options;
  std::string synthetic;
  CLI::App *build = app.add_subcommand("build", "Compile a model into an engine plan");
  build->add_option("model", options.input, "model.json, a Hugging Face config.json, or a model "
                                            "directory (config.json, *.safetensors, tokenizer.json)")
      ->required();
  build->add_option("-o,--output", options.output, "Plan file to write");
  build->add_option("--dtype", options.dtype, "Weight dtype of the plan: f32, f16 or bf16 "
                                              "(default: the model's)")
      ->transform(CLI::Transformer(llmc::cli::dtypeAliases(), CLI::ignore_case)); // float16, half...
  build->add_option("--max-seq-len", options.maxSeqLen,
                    "Longest sequence the plan accepts (default: the model's)");
  CLI::Option *syntheticOption =
      build->add_option("--synthetic-weights", synthetic,
                        "Store no weights: the runtime generates them from SEED (default 0); "
                        "for benchmarks at real shapes")
          ->expected(0, 1);
  build->add_flag("--emit-mlir", options.emitMlir, "Print the IR after import and stop");
  std::string emit;
  build->add_option("--emit", emit, "What to print instead of writing a plan: mlir");
  build->add_flag("--print-ir-after-all", options.printIrAfterAll,
                  "Print the IR after every stage and pass");
  build->add_option("--print-ir-after", options.printIrAfter,
                    "Print the IR after one stage (import, prune, fuse, quantize) or MLIR pass");
  build->add_flag("-v,--verbose", options.verbose, "Say what each stage changed");
  build->add_option("--target", options.targets,
                    "Comma-separated targets: cpu, sm_90a (Hopper cubin), ptx (portable, sm_80+); "
                    "default: cpu plus the GPU targets when this llmc has NVRTC");
  build->add_option("-j,--jobs", options.jobs, "Threads compiling GPU kernels (default: all cores)");
  build->add_option("-O", options.optimizationLevel,
                    "Optimization level: 0 runs no fusion pass, 1 (default) all of them");
  build
      ->add_option("--no-fuse", options.noFuse,
                   "Comma-separated fusions to skip: qkv, swiglu, head, norm, residual, rope")
      ->delimiter(',');

  build->add_option("--quantize", options.quantize,
                    "quantized weights for the linear layers: int4 rtn (round to nearest), awq "
                    "(activation-aware, needs --calib) or gptq (error compensation, needs "
                    "--calib); or int8 (W8A16, symmetric, near-lossless)");
  CLI::Option *groupSizeOption = build->add_option(
      "--group-size", options.groupSize,
      "int4 input columns per f16 scale and zero point: 32, 64 or 128 (default); int8: 0 (a "
      "scale per output channel, the default) or a multiple of 32 (f16 scales)");
  build->add_option("--mixed", options.mixed,
                    "Mixed precision (with --quantize gptq or rtn): comma-separated rules "
                    "NAME[@LAYERS]=int4|int8|float, NAME a part of a linear's weight name, "
                    "LAYERS N, A-B or A-; the last matching rule wins, e.g. "
                    "down_proj=int8,v_proj@0-3=int8");
  std::string lmHead;
  CLI::Option *lmHeadOption = build->add_flag(
      "--quantize-lm-head{plan}", lmHead,
      "Quantize the lm_head (a tied embedding's copy) too: int4 round to nearest in "
      "--group-size groups, or int8 with --quantize int8; =int8 or =int4 choose (int8 in an "
      "int4 plan: a scale per output channel). CPU programs only");
  build->add_option("--calib", options.calibFile, "AWQ/GPTQ calibration text (UTF-8)");
  build->add_option("--calib-tokens", options.calibTokens,
                    "Calibration tokens AWQ/GPTQ read from --calib (default 8192)");
  build->add_flag("--awq-clip", options.awqClip,
                  "AWQ: search a clipping range per group (the default)");
  build->add_flag("--no-awq-clip", options.noAwqClip, "AWQ: scales only, no clipping search");
  build->add_flag("--no-awq-scales", options.noAwqScales,
                  "AWQ: clipping search only, no per-channel scales");
  build->add_flag("--awq-norm-scales", options.awqNormScales,
                  "AWQ: search the scales of q/k/v and gate/up (after an RMSNorm) too, as the "
                  "reference does; by default only o_proj's and down_proj's");
  build->add_flag_callback(
      "--sequential-calib", [&options] { options.sequentialCalibration = true; },
      "AWQ/GPTQ: calibrate each layer on the outputs of the quantized earlier layers");
  build->add_flag_callback(
      "--no-sequential-calib", [&options] { options.sequentialCalibration = false; },
      "AWQ/GPTQ: calibrate every layer on the float model's activations");
  build->add_option("--gptq-dampening", options.gptqDampening,
                    "GPTQ: added to the Hessian's diagonal, times its mean (default 0.003)");
  build->add_flag("--gptq-act-order", options.gptqActOrder,
                  "GPTQ: quantize columns by decreasing activation energy");
  build->add_flag("--no-gptq-range-search", options.noGptqRangeSearch,
                  "GPTQ: each group keeps its full range (no shrink search)");
  build->add_flag("--no-gptq-refit", options.noGptqRefit,
                  "GPTQ: keep the scales the columns were rounded with (no refit under H)");
  build->add_flag("--allow-nonfinite-weights", options.allowNonFiniteWeights,
                  "Build even when weights hold NaN or Inf values (warn instead of refusing)");

  if (int code = llmc::cli::parseArgs(app, argc, argv); code >= 0)
    return checkStdout(code);

  if (lmHeadOption->count() > 0) {
    options.quantizeLmHead = true;
    options.lmHeadFormat = lmHead == "plan" ? "" : lmHead; // runBuild names a bad one
  }
  if (options.quantize == "int8" && groupSizeOption->count() == 0)
    options.groupSize = 0; // int8: a scale per output channel unless asked otherwise
  if (!emit.empty()) {
    if (emit != "mlir")
      return llmc::cli::fail("--emit " + emit + " is not supported (supported: mlir)");
    options.emitMlir = true;
  }
  if (syntheticOption->count() > 0) {
    try {
      options.syntheticSeed = synthetic.empty() ? 0 : std::stoull(synthetic);
    } catch (const std::exception &) {
      return llmc::cli::fail("--synthetic-weights: '" + synthetic + "' is not a seed (an integer)");
    }
  }
  if (options.output.empty() && !options.emitMlir)
    return llmc::cli::fail("no output plan: pass -o engine.plan (or --emit mlir to print the IR)");

  ProgressPrinter progress;
  llmc::BuildReporter reporter;
  reporter.info = [](const std::string &line) { std::fprintf(stderr, "llmc: %s\n", line.c_str()); };
  reporter.warning = [](const std::string &line) {
    std::fprintf(stderr, "warning: %s\n", line.c_str());
  };
  reporter.verbose = [&](const std::string &line) {
    if (options.verbose)
      std::fprintf(stderr, "llmc: %s\n", line.c_str());
  };
  reporter.ir = [](const std::string &text) { std::fputs(text.c_str(), stdout); };
  reporter.progress = [&](uint64_t done, uint64_t total) { progress(done, total); };
  reporter.compileProgress = [](size_t done, size_t total) { printCompileProgress(done, total); };
  TaskProgressPrinter taskProgress;
  reporter.taskProgress = [&](const std::string &task, uint64_t done, uint64_t total) {
    taskProgress(task, done, total);
  };
  llmc::Status status = llmc::runBuild(options, reporter);
  if (!status)
    return llmc::cli::fail(status);
  return checkStdout(0);
}
