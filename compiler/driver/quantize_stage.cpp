#include "driver/quantize_stage.h"

#include "ir/LlmOps.h"
#include "kernels/common/q4_layout.h"
#include "kernels/common/q8_layout.h"
#include "plan/synthetic_float.h"
#include "quantize/calibration.h"
#include "quantize/calibration_model.h"
#include "quantize/int8.h"
#include "support/mapped_file.h"

#include <mlir/Dialect/Func/IR/FuncOps.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <set>

namespace llmc {
namespace {

// --mixed: int4 of rtn or gptq beside int8 and float linears.
Status checkMixedOptions(const BuildOptions &o) {
  if (o.mixed.empty())
    return Status::ok();
  if (o.quantize != "rtn" && o.quantize != "gptq")
    return Status::error("--mixed mixes int4 linears of --quantize rtn or gptq with int8 and "
                         "float ones; " +
                         (o.quantize.empty() ? std::string("give --quantize gptq (or rtn)")
                          : o.quantize == "awq"
                              ? std::string("AWQ's scales fold from one linear into another, "
                                            "which a mixed plan does not do yet: use gptq")
                              : "--quantize " + o.quantize + " has no int4 linears to mix"));
  if (o.syntheticSeed)
    return Status::error("--mixed needs checkpoint weights (its int8 linears are rounded from "
                         "them), not --synthetic-weights");
  return Status::ok();
}

// Each float linear's format under the recipe, in program order; every rule
// must name at least one linear (a misspelt name is an error, not a no-op).
Expected<std::vector<std::pair<std::string, quant::LinearFormat>>>
linearFormats(mlir::func::FuncOp forward, const quant::MixedRecipe &recipe,
              const std::string &text) {
  std::vector<std::pair<std::string, quant::LinearFormat>> formats;
  std::vector<bool> used(recipe.rules.size(), false);
  forward.walk([&](llm::LinearOp linear) {
    auto weight = linear.getWeight().getDefiningOp<llm::WeightOp>();
    if (!weight || !llvm::isa<mlir::RankedTensorType>(weight.getType()))
      return;
    const std::string name = weight.getName().str();
    for (size_t r = 0; r < recipe.rules.size(); ++r)
      used[r] = used[r] || recipe.rules[r].matches(name);
    formats.emplace_back(name, recipe.formatOf(name));
  });
  for (size_t r = 0; r < recipe.rules.size(); ++r)
    if (!used[r])
      return Status::error("--mixed " + text + ": rule " + std::to_string(r + 1) + " ('" +
                           recipe.rules[r].component +
                           "') matches no linear of this model; its linears' weights are named "
                           "like '" +
                           (formats.empty() ? std::string("?") : formats.front().first) + "'");
  return formats;
}

// Elements of the IR's weights (each name once): the parameters a plan's
// bytes per weight divide by.
uint64_t weightElements(mlir::ModuleOp module) {
  uint64_t elements = 0;
  std::set<std::string> seen;
  module.walk([&](llm::WeightOp op) {
    auto type = llvm::dyn_cast<mlir::RankedTensorType>(op.getType());
    if (type && seen.insert(op.getName().str()).second)
      elements += static_cast<uint64_t>(type.getNumElements());
  });
  return elements;
}

Status checkOptions(const BuildOptions &o) {
  LLMC_RETURN_IF_ERROR(checkMixedOptions(o));
  if (o.sequentialCalibration && o.quantize != "awq" && o.quantize != "gptq")
    return Status::error("--sequential-calib and --no-sequential-calib apply to --quantize awq or "
                         "gptq only");
  if (o.quantize.empty()) {
    if (!o.calibFile.empty() || o.awqClip || o.noAwqClip || o.noAwqScales || o.awqNormScales ||
        o.gptqActOrder || o.noGptqRangeSearch || o.noGptqRefit || o.gptqDampening)
      return Status::error("--calib and the --awq-* and --gptq-* options need --quantize awq or "
                           "gptq");
    return Status::ok();
  }
  if (o.quantize != "rtn" && o.quantize != "awq" && o.quantize != "gptq" && o.quantize != "int8")
    return Status::error("--quantize '" + o.quantize +
                         "' is not supported; use rtn, awq, gptq or int8");
  if (o.quantize == "int8") { // W8A16, quantized after lowering (quantize/int8.h)
    if (!hd::q8ValidGroupSize(o.groupSize))
      return Status::error("--group-size " + std::to_string(o.groupSize) +
                           " for int8 is not 0 (a scale per output channel) or a positive "
                           "multiple of 32");
    if (!o.calibFile.empty() || o.awqClip || o.noAwqClip || o.noAwqScales || o.awqNormScales ||
        o.gptqActOrder || o.noGptqRangeSearch || o.noGptqRefit || o.gptqDampening)
      return Status::error("--calib and the --awq-* and --gptq-* options do not apply to "
                           "--quantize int8");
    if (o.syntheticSeed)
      return Status::error("--quantize int8 needs checkpoint weights, not --synthetic-weights");
    return Status::ok();
  }
  if (!hd::q4ValidGroupSize(o.groupSize))
    return Status::error("--group-size " + std::to_string(o.groupSize) +
                         " is not a positive multiple of 32 (use 32, 64 or 128)");
  if (o.quantize != "rtn" && o.calibFile.empty())
    return Status::error("--quantize " + o.quantize + " needs calibration text: --calib FILE");
  if (o.quantize == "rtn" && !o.calibFile.empty())
    return Status::error("--calib applies to --quantize awq or gptq only");
  if (o.quantize != "awq" && (o.awqClip || o.noAwqClip))
    return Status::error("--awq-clip and --no-awq-clip apply to --quantize awq only");
  if (o.awqClip && o.noAwqClip)
    return Status::error("--awq-clip and --no-awq-clip contradict each other; give one");
  if (o.quantize != "awq" && o.noAwqScales)
    return Status::error("--no-awq-scales applies to --quantize awq only");
  if (o.quantize != "awq" && o.awqNormScales)
    return Status::error("--awq-norm-scales applies to --quantize awq only");
  if (o.noAwqScales && o.awqNormScales)
    return Status::error("--no-awq-scales and --awq-norm-scales contradict each other; give one");
  if (o.noAwqScales && o.noAwqClip)
    return Status::error("--no-awq-scales with --no-awq-clip leaves plain RTN; use --quantize rtn");
  if (o.quantize != "gptq" && (o.gptqActOrder || o.noGptqRangeSearch || o.noGptqRefit))
    return Status::error("--gptq-act-order, --no-gptq-range-search and --no-gptq-refit apply to "
                         "--quantize gptq only");
  if (o.quantize != "gptq" && o.gptqDampening)
    return Status::error("--gptq-dampening applies to --quantize gptq only");
  if (o.gptqDampening && !(*o.gptqDampening > 0.0 && *o.gptqDampening <= 1.0))
    return Status::error("--gptq-dampening " + std::to_string(*o.gptqDampening) +
                         " is not in (0, 1]: it is a fraction of the Hessian's mean diagonal "
                         "(default 0.003)");
  if (o.calibTokens < 2)
    return Status::error("--calib-tokens " + std::to_string(o.calibTokens) +
                         " is too small (at least 2; a few thousand is typical)");
  return Status::ok();
}

// Whether `data` points into one of the checkpoint's file mappings (not a
// tensor derived at import, which lives on the heap).
bool inFileMapping(const WeightSet &weights, const uint8_t *data) {
  for (const SafetensorsFile &file : weights.files()) {
    const auto *begin = static_cast<const uint8_t *>(file.mapping().data());
    if (data >= begin && data < begin + file.mapping().size())
      return true;
  }
  return false;
}

// The float weights the IR names: views of the checkpoint, or the values
// the runtime would generate for a --synthetic-weights plan.
Expected<std::unique_ptr<quant::WeightTable>>
collectSourceWeights(mlir::ModuleOp module, const WeightSet *weights, uint64_t syntheticSeed) {
  auto table = std::make_unique<quant::WeightTable>();
  Status status = Status::ok();
  module.walk([&](llm::WeightOp op) {
    std::string name = op.getName().str();
    auto type = llvm::dyn_cast<mlir::RankedTensorType>(op.getType());
    if (!status || !type || table->find(name) != nullptr)
      return;
    std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
    if (weights != nullptr) {
      const TensorView *t = weights->find(name);
      if (t == nullptr) {
        status = Status::error("weight '" + name + "' is not in the checkpoint");
        return;
      }
      table->addView(name, t->data, t->dtype, shape, inFileMapping(*weights, t->data));
      return;
    }
    // Generated when calibration reaches it (quant::WeightTable::addGenerated).
    fb::SyntheticInitT init = syntheticInitFor(name, type.getRank(), syntheticSeed);
    table->addGenerated(name, shape, [init](float *values, uint64_t count) {
      for (uint64_t i = 0; i < count; ++i)
        values[i] = syntheticFloat(init.kind, init.std, init.seed, i);
    });
  });
  if (!status)
    return status;
  return table;
}

// The f32 bytes collectSourceWeights would allocate for generated weights.
uint64_t syntheticFloatBytes(mlir::ModuleOp module) { return 4 * weightElements(module); }

// AWQ on synthetic weights materializes them as f32 to calibrate: refuse
// (rather than be killed for memory) when they would not fit.
Status checkMaterializable(mlir::ModuleOp module, const BuildOptions &options) {
  uint64_t limit = options.materializeLimitBytes;
  if (limit == 0)
    limit = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
            static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  const uint64_t bytes = syntheticFloatBytes(module);
  if (bytes <= limit)
    return Status::ok();
  auto gb = [](uint64_t b) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.1f GB", static_cast<double>(b) / 1e9);
    return std::string(text);
  };
  return Status::error("--synthetic-weights --quantize awq generates the float weights to "
                       "calibrate on them: " +
                       gb(bytes) + " of f32, more than the " + gb(limit) +
                       " of memory here; --quantize rtn builds the same int4 layout and kernels "
                       "with the weights generated at load time");
}

// GPTQ keeps X^T X [K, K] f32 per group of the segment being calibrated
// (quant::calibrationSegments) until the group is rounded: refuse (rather
// than be killed for memory) when one segment's would not fit.
Status checkGramMemory(const std::vector<LinearGroup> &groups,
                       const quant::CalibrationModel &model, const BuildOptions &options) {
  uint64_t limit = options.materializeLimitBytes;
  if (limit == 0)
    limit = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
            static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  LLMC_ASSIGN_OR_RETURN(std::vector<std::vector<size_t>> segments,
                        quant::calibrationSegments(groups, model));
  uint64_t bytes = 0;
  for (const std::vector<size_t> &members : segments) {
    uint64_t segment = 0;
    for (size_t g : members)
      segment += 4 * static_cast<uint64_t>(groups[g].cols) * static_cast<uint64_t>(groups[g].cols);
    bytes = std::max(bytes, segment);
  }
  if (bytes <= limit / 2)
    return Status::ok();
  char text[200];
  std::snprintf(text, sizeof(text),
                "--quantize gptq keeps X^T X per linear group of the part of the model being "
                "calibrated: %.1f GB of f32, more than half of the %.1f GB of memory here",
                static_cast<double>(bytes) / 1e9, static_cast<double>(limit) / 1e9);
  return Status::error(std::string(text) + "; use --quantize awq or rtn for this model");
}

// The ids of --calib, and the line that says what calibration used.
Expected<std::vector<int32_t>> calibrationIds(const Tokenizer &tokenizer,
                                              const quant::CalibrationOptions &calib,
                                              const BuildOptions &options, std::string *detail) {
  LLMC_ASSIGN_OR_RETURN(std::string text, readTextFile(options.calibFile));
  LLMC_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.tryEncode(text, false));
  *detail = "calibrated on " +
            std::to_string(std::min<int64_t>(static_cast<int64_t>(ids.size()), calib.maxTokens)) +
            " tokens of " + options.calibFile;
  return ids;
}

std::string phaseTimes(const quant::PhaseTimes &t, QuantizeMethod method) {
  char text[160];
  std::snprintf(text, sizeof(text), "calibration %.1f s, %s %.1f s, %s %.1f s", t.calibration,
                method == QuantizeMethod::Awq ? "AWQ search" : "measuring", t.search,
                method == QuantizeMethod::Gptq ? "GPTQ" : "packing int4", t.packing);
  return text;
}

// Totals over groups, weighted by their norms: sum(err) / sum(norm).
struct Totals {
  double rtnOutput = 0, output = 0, outputNorm = 0, rtnWeight = 0, weight = 0, weightNorm = 0;
  explicit Totals(const std::vector<quant::GroupReport> &groups) {
    for (const quant::GroupReport &g : groups) {
      rtnOutput += g.rtnOutputError;
      output += g.outputError;
      outputNorm += g.outputNorm;
      rtnWeight += g.rtnWeightError;
      weight += g.weightError;
      weightNorm += g.weightNorm;
    }
  }
};

std::string ratio(double err, double norm) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3e", norm > 0 ? err / norm : 0.0);
  return text;
}

} // namespace

WeightResolver QuantizeOutcome::weightResolver() const {
  const quant::WeightTable *first = derived.get(), *second = source.get();
  return [first, second](const std::string &name) -> Expected<WeightSource> {
    const quant::WeightEntry *e = first->find(name);
    if (e == nullptr)
      e = second->find(name);
    if (e == nullptr)
      return Status::error("weight '" + name + "' is neither in the checkpoint nor made by " +
                           "the quantize stage");
    return WeightSource{static_cast<const uint8_t *>(e->data), e->dtype, e->elements(), {}};
  };
}

Expected<QuantizeOutcome> prepareQuantization(mlir::ModuleOp module, const WeightSet *weights,
                                              const Tokenizer &tokenizer, int64_t maxSeqLen,
                                              const BuildOptions &options,
                                              const BuildReporter &reporter) {
  LLMC_RETURN_IF_ERROR(checkOptions(options));
  QuantizeOutcome outcome;
  outcome.parameters = weightElements(module);
  if (options.quantize.empty() || options.quantize == "int8") // int8: after lowering
    return outcome;
  auto forward = module.lookupSymbol<mlir::func::FuncOp>("forward");
  if (!forward)
    return Status::error("the module has no func.func @forward");
  if (!options.mixed.empty()) {
    LLMC_ASSIGN_OR_RETURN(outcome.mixed, quant::parseMixedRecipe(options.mixed));
    LLMC_ASSIGN_OR_RETURN(outcome.linearFormats,
                          linearFormats(forward, outcome.mixed, options.mixed));
    for (const auto &[name, format] : outcome.linearFormats)
      if (format != quant::LinearFormat::Int4)
        outcome.config.floatWeights.push_back(name);
  }
  outcome.config.method = options.quantize == "awq"    ? QuantizeMethod::Awq
                          : options.quantize == "gptq" ? QuantizeMethod::Gptq
                                                       : QuantizeMethod::Rtn;
  const bool clip = outcome.config.method == QuantizeMethod::Awq && !options.noAwqClip &&
                    !options.awqScalesOnly;
  outcome.config.groupSize = options.groupSize;
  outcome.config.scalesOnly = options.awqScalesOnly;
  if (options.syntheticSeed && outcome.config.method == QuantizeMethod::Rtn) {
    // Nothing to compute here: the plan stays synthetic, its int4 tensors are
    // generated at load time as the RTN coding of the generated float values
    // (the bytes this stage would store), so an 8B shape builds in seconds.
    outcome.detail = "synthetic weights: int4 generated at load time (RTN of the synthetic values)";
    return outcome;
  }
  if (weights == nullptr)
    LLMC_RETURN_IF_ERROR(checkMaterializable(module, options));
  LLMC_ASSIGN_OR_RETURN(outcome.source,
                        collectSourceWeights(module, weights, options.syntheticSeed.value_or(0)));
  outcome.derived = std::make_unique<quant::WeightTable>();

  ThreadPool pool(0);
  quant::Progress progress = [&](const std::string &task, uint64_t done, uint64_t total) {
    if (reporter.taskProgress)
      reporter.taskProgress(task, done, total);
  };
  std::vector<LinearGroup> groups = findLinearGroups(forward);
  std::unique_ptr<quant::CalibrationModel> model;
  quant::CalibrationOptions calib;
  std::vector<int32_t> calibIds;
  if (outcome.config.method != QuantizeMethod::Rtn) {
    calib.maxTokens = options.calibTokens;
    calib.window = std::min<int64_t>(512, maxSeqLen);
    calib.meanSkipsFirstRow = tokenizer.bosId().has_value();
    // GPTQ: the whole X^T X per group; AWQ's clipping: its group-size blocks.
    calib.gramBlock = outcome.config.method == QuantizeMethod::Gptq ? INT64_MAX
                      : clip                                        ? options.groupSize
                                                                    : 0;
    LLMC_ASSIGN_OR_RETURN(
        model, quant::CalibrationModel::create(forward, *outcome.source, pool,
                                                 std::max(calib.window, calib.sampleRows)));
    if (outcome.config.method == QuantizeMethod::Gptq)
      LLMC_RETURN_IF_ERROR(checkGramMemory(groups, *model, options));
    LLMC_ASSIGN_OR_RETURN(calibIds, calibrationIds(tokenizer, calib, options, &outcome.detail));
  }
  quant::QuantizeSettings settings;
  settings.config = outcome.config;
  settings.clip = clip;
  settings.normScales = options.awqNormScales;
  settings.actOrder = options.gptqActOrder;
  if (options.gptqDampening)
    settings.gptqDampening = *options.gptqDampening;
  settings.gptqRangeSearch = !options.noGptqRangeSearch;
  settings.gptqRefitScales = !options.noGptqRefit;
  settings.fixedAlpha = options.awqFixedAlpha;
  if (options.noAwqScales)
    settings.fixedAlpha = 0.0f; // s = 1 everywhere: nothing folds, the clipping search decides
  settings.sequential = options.sequentialCalibration.value_or(false);
  if (model) {
    quant::PhaseTimes times;
    auto reports = quant::calibrateAndQuantize(groups, *model, calibIds, tokenizer.bosId(), calib,
                                               *outcome.source, settings, pool, *outcome.derived,
                                               progress, &times);
    if (!reports)
      return reports.status().withContext(options.calibFile);
    outcome.groups = std::move(*reports);
    outcome.detail += " (" + phaseTimes(times, outcome.config.method) + ")";
  } else {
    LLMC_ASSIGN_OR_RETURN(outcome.groups,
                          quant::quantizeGroups(groups, nullptr, nullptr, *outcome.source,
                                                settings, pool, *outcome.derived, progress));
  }
  Totals totals(outcome.groups);
  std::string errors = "weight error " + ratio(totals.weight, totals.weightNorm);
  if (outcome.config.method != QuantizeMethod::Rtn)
    errors = "output error " + ratio(totals.output, totals.outputNorm) + " (RTN " +
             ratio(totals.rtnOutput, totals.outputNorm) + "), " + errors + " (RTN " +
             ratio(totals.rtnWeight, totals.weightNorm) + ")";
  outcome.detail = outcome.detail.empty() ? errors : outcome.detail + "; " + errors;
  return outcome;
}

std::vector<std::string> describeQuantization(const QuantizeOutcome &outcome) {
  std::vector<std::string> lines;
  const bool awq = outcome.config.method == QuantizeMethod::Awq;
  const bool calibrated = outcome.config.method != QuantizeMethod::Rtn;
  for (const quant::GroupReport &g : outcome.groups) {
    char alpha[32];
    std::snprintf(alpha, sizeof(alpha), "%.2f", g.alpha);
    std::string line = "quantize:   " + g.label + ": ";
    if (awq)
      line += (!g.scaled    ? std::string("not scalable (RTN)")
               : g.searched ? "alpha " + std::string(alpha)
                            : std::string("s = 1 (after an RMSNorm; --awq-norm-scales searches it)")) +
              ", ";
    if (calibrated)
      line += "output error " + ratio(g.outputError, g.outputNorm) + " (RTN " +
              ratio(g.rtnOutputError, g.outputNorm) + "), ";
    line += "weight error " + ratio(g.weightError, g.weightNorm) + " (RTN " +
            ratio(g.rtnWeightError, g.weightNorm) + ")";
    lines.push_back(line);
  }
  for (const auto &[name, format] : outcome.linearFormats)
    lines.push_back("mixed:      " + name + ": " + quant::linearFormatName(format));
  return lines;
}

Expected<std::string> quantizeMixedInt8(const QuantizeOutcome &outcome, PlanContents &plan,
                                        std::vector<std::vector<uint8_t>> &storage) {
  // A plan tensor's name is its weight's, or "a+b+c" for a fused matrix.
  auto formatOfTensor = [&](const std::string &tensorName) -> Expected<quant::LinearFormat> {
    std::vector<std::string> parts;
    for (size_t begin = 0;;) {
      const size_t end = tensorName.find('+', begin);
      parts.push_back(tensorName.substr(begin, end == std::string::npos ? end : end - begin));
      if (end == std::string::npos)
        break;
      begin = end + 1;
    }
    const quant::LinearFormat first = outcome.mixed.formatOf(parts.front());
    for (const std::string &part : parts)
      if (outcome.mixed.formatOf(part) != first)
        return Status::error("--mixed: '" + parts.front() + "' is " +
                             quant::linearFormatName(first) + " and '" + part + "' is " +
                             quant::linearFormatName(outcome.mixed.formatOf(part)) +
                             ", but the fusion passes made one matrix of them; give them one "
                             "format, or build with --no-fuse qkv,swiglu");
    return first;
  };
  ThreadPool pool(0);
  LLMC_ASSIGN_OR_RETURN(
      int matrices,
      quant::quantizePlanLinearsQ8(pool, plan, /*groupSize=*/0, storage,
                                   [&](const std::string &name) -> Expected<bool> {
                                     LLMC_ASSIGN_OR_RETURN(quant::LinearFormat format,
                                                           formatOfTensor(name));
                                     return format == quant::LinearFormat::Int8;
                                   }));
  int counts[3] = {0, 0, 0};
  for (const auto &entry : outcome.linearFormats)
    ++counts[static_cast<int>(entry.second)];
  return "mixed " + outcome.mixed.text + ": " + std::to_string(counts[0]) + " linears int4, " +
         std::to_string(counts[1]) + " int8 (per output channel, " + std::to_string(matrices) +
         " plan matrices), " + std::to_string(counts[2]) + " float";
}

} // namespace llmc
