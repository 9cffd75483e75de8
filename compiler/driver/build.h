// `llmc build`: the compiler pipeline from a model on disk to an engine plan.
//
//   import    model.json / config.json / HF dir -> validated spec, weights,
//             tokenizer -> `llm` IR (models/<arch>_graph.cpp)
//   prune     dead values and duplicate weights removed (canonicalize, cse)
//   quantize  --quantize rtn|awq: int4 linear weights (llm-quantize), AWQ
//             calibration on the CPU kernels (driver/quantize_stage.h)
//   fuse      the fusion passes (passes/Fuse*.cpp): -O0 skips them all,
//             --no-fuse single ones
//   lower     IR -> engine program + memory plan (codegen/) -> plan file
//   codegen   CUDA kernels per GPU target (codegen/cuda, NVRTC)
//
// Each stage reports its time; with verbose, what it changed.
#pragma once

#include "support/status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace llmc {

struct BuildOptions {
  std::string input;                     // model.json, config.json or HF directory
  std::string output;                    // plan path ("" with emitMlir: no plan)
  std::string dtype;                     // "", "f32", "f16", "bf16" ("" = the spec's)
  int64_t maxSeqLen = 0;                 // 0 = the spec's
  std::optional<uint64_t> syntheticSeed; // --synthetic-weights[=SEED]
  bool emitMlir = false;                 // print the IR after import and stop
  bool printIrAfterAll = false;
  std::string printIrAfter; // a stage or MLIR pass name
  bool verbose = false;
  std::string targets;                // --target: "cpu,sm_90a,ptx" subset ("" = default)
  int jobs = 0;                       // kernel compile threads (0 = all cores)
  int optimizationLevel = 1;          // -O0: no fusion; -O1 (default): every fusion pass
  std::vector<std::string> noFuse;    // --no-fuse: qkv, swiglu, head, norm, residual, rope
  std::string quantize;               // --quantize: "" (none), "rtn", "awq" or "gptq"
  int64_t groupSize = 128;            // --group-size: int4 columns per scale/zero
  std::string calibFile;              // --calib: AWQ calibration text
  int64_t calibTokens = 8192;         // --calib-tokens: calibration ids used
  bool awqClip = false;               // --awq-clip: AWQ's weight clipping search (the default)
  bool noAwqClip = false;             // --no-awq-clip: AWQ without the clipping search
  bool noAwqScales = false;           // --no-awq-scales: AWQ's clipping search without scales
  bool awqNormScales = false;         // --awq-norm-scales: AWQ scales after RMSNorms too (the reference)
  std::optional<double> gptqDampening; // --gptq-dampening: times H's mean diagonal (default 0.003)
  bool gptqActOrder = false;          // --gptq-act-order: GPTQ columns by decreasing H[k][k]
  bool noGptqRangeSearch = false;     // --no-gptq-range-search: GPTQ groups keep their full range
  bool noGptqRefit = false;           // --no-gptq-refit: GPTQ keeps the scales it rounded with
  std::string mixed;                  // --mixed: per-linear int4/int8/float recipe (quantize/mixed.h)
  // --sequential-calib / --no-sequential-calib: AWQ/GPTQ calibrate each
  // layer on the outputs of the already quantized ones (unset: the default,
  // docs/quantization.md "Streaming calibration").
  std::optional<bool> sequentialCalibration;
  bool quantizeLmHead = false;        // --quantize-lm-head: the vocabulary projection too
                                      //   (int4 RTN or int8, quantize/lm_head.h)
  // --quantize-lm-head=int4|int8: the head's format; "" (the bare flag): the
  // plan's, int8 for --quantize int8, else int4 in --group-size groups. An
  // int8 head of an int4 plan has a scale per output channel.
  std::string lmHeadFormat;
  bool awqScalesOnly = false;         // tests: fold AWQ scales, keep float weights
  std::optional<float> awqFixedAlpha; // tests: this alpha instead of the search
  // Most bytes `--synthetic-weights --quantize awq` may materialize as f32
  // for calibration; 0: this machine's physical memory.
  uint64_t materializeLimitBytes = 0;
  // --allow-nonfinite-weights: NaN/Inf in the checkpoint's weights become
  // warnings instead of an error.
  bool allowNonFiniteWeights = false;
};

// Where the driver reports progress and results (the CLI prints them).
struct BuildReporter {
  std::function<void(const std::string &line)> info;              // summaries, stage times
  std::function<void(const std::string &line)> warning;           // non-fatal problems
  std::function<void(const std::string &line)> verbose;           // -v details
  std::function<void(const std::string &text)> ir;                // printed IR
  std::function<void(uint64_t done, uint64_t total)> progress;    // weight bytes written
  std::function<void(size_t done, size_t total)> compileProgress; // GPU kernels compiled
  // Long quantize-stage work: "calibrating" (tokens), "AWQ search" (groups), ...
  std::function<void(const std::string &task, uint64_t done, uint64_t total)> taskProgress;
};

Status runBuild(const BuildOptions &options, const BuildReporter &reporter);

} // namespace llmc
