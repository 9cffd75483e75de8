#include "driver/build.h"
#include "driver/gpu_stage.h"
#include "driver/quantize_stage.h"
#include "quantize/int8.h"
#include "quantize/lm_head.h"

#include "frontend/derived_tensors.h"
#include "frontend/model_spec.h"
#include "frontend/safetensors.h"
#include "frontend/weight_check.h"
#include "kernels/common/q4_layout.h"
#include "ir/LlmOps.h"
#include "lower_to_plan.h"
#include "models/layer_norm_family.h"
#include "models/layer_norm_graph.h"
#include "models/llama_graph.h"
#include "passes/Passes.h"
#include "plan/plan_format.h"
#include "plan_writer.h"
#include "support/mapped_file.h"
#include "tokenizer/tokenizer.h"

#include <llvm/ADT/StringMap.h>
#include <mlir/Dialect/Func/IR/FuncOps.h>
#include <mlir/IR/MLIRContext.h>
#include <mlir/Pass/PassManager.h>
#include <mlir/Transforms/Passes.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <set>
#include <sstream>

#include <sys/stat.h>

#ifndef LLMC_VERSION
#define LLMC_VERSION "0.0.0"
#endif

namespace llmc {
namespace {

using Clock = std::chrono::steady_clock;

std::string formatBytes(uint64_t bytes) {
  char text[64];
  if (bytes >= (uint64_t(1) << 30))
    std::snprintf(text, sizeof(text), "%.2f GiB", bytes / double(uint64_t(1) << 30));
  else if (bytes >= (uint64_t(1) << 20))
    std::snprintf(text, sizeof(text), "%.2f MiB", bytes / double(1 << 20));
  else
    std::snprintf(text, sizeof(text), "%.1f KiB", bytes / 1024.0);
  return text;
}

std::string printIr(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return os.str();
}

Expected<mlir::Type> matrixElementType(mlir::MLIRContext &context, const std::string &dtype) {
  mlir::Builder b(&context);
  if (dtype == "f32")
    return b.getF32Type();
  if (dtype == "f16")
    return b.getF16Type();
  if (dtype == "bf16")
    return b.getBF16Type();
  return Status::error("--dtype '" + dtype + "' is not supported; use f32, f16 or bf16");
}

// Times one named stage and prints the IR after it when asked.
class StageRunner {
public:
  StageRunner(const BuildOptions &options, const BuildReporter &reporter)
      : options_(options), reporter_(reporter) {}

  void finish(const std::string &stage, Clock::time_point start, mlir::ModuleOp module,
              const std::string &detail) {
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    char line[256];
    std::snprintf(line, sizeof(line), "stage %-8s %8.1f ms  %s", stage.c_str(), ms,
                  detail.c_str());
    reporter_.info(line);
    if (module && (options_.printIrAfterAll || options_.printIrAfter == stage))
      reporter_.ir("// -----// IR Dump After stage '" + stage + "' //----- //\n" +
                   printIr(module));
  }

private:
  const BuildOptions &options_;
  const BuildReporter &reporter_;
};

size_t countOps(mlir::ModuleOp module) {
  size_t n = 0;
  module.walk([&](mlir::Operation *) { ++n; });
  return n;
}

// -v after import: how many distinct weights the IR refers to and their size.
std::string describeWeights(mlir::ModuleOp module) {
  llvm::StringMap<uint64_t> bytesByName;
  module.walk([&](llm::WeightOp op) {
    bytesByName.try_emplace(op.getName(), weightByteSize(op.getType()));
  });
  uint64_t total = 0;
  for (const auto &entry : bytesByName)
    total += entry.second;
  return "import: " + std::to_string(bytesByName.size()) + " weights referenced, " +
         formatBytes(total) + " (" + std::to_string(total) + " B)";
}

// -v after prune: llm-prune's report, one line per weight it made unneeded,
// and what canonicalize + cse removed after it.
void reportPrune(const BuildReporter &reporter, const PruneReport &pruned, size_t opsRemoved) {
  reporter.verbose("prune: llm-prune " + pruned.summary());
  for (const PruneReport::DroppedWeight &w : pruned.droppedWeights)
    reporter.verbose("prune:   " + w.name + " " + w.type + ": " + formatBytes(w.bytes) +
                     " no longer needed");
  int64_t byPrune = pruned.mergedWeightOps + pruned.erasedWeightOps + pruned.erasedOps;
  reporter.verbose("prune: canonicalize + cse removed " +
                   std::to_string(static_cast<int64_t>(opsRemoved) - byPrune) + " more ops");
}

// Hash of what the plan was built from: config, tokenizer, and the weight
// files' safetensors headers (not every weight byte: that would read GBs).
std::string sourceHash(const ModelSpec &spec, const std::string &tokenizerJson,
                       const WeightSet *weights) {
  uint64_t h = fnv1a64(reinterpret_cast<const uint8_t *>(tokenizerJson.data()),
                       tokenizerJson.size());
  auto mix = [&](const std::string &s) {
    h = fnv1a64(reinterpret_cast<const uint8_t *>(s.data()), s.size(), h);
  };
  auto config = readTextFile(spec.configSource);
  if (config)
    mix(*config);
  if (weights != nullptr)
    for (const auto &[name, tensor] : weights->all())
      mix(name + std::string(dtypeName(tensor.dtype)) + std::to_string(tensor.byteSize));
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(h));
  return text;
}

// The graph builder of each architecture family (models/<family>_graph.cpp),
// by Hugging Face class name. The frontend has already rejected names that
// models/architecture.cpp does not register, so a miss here is a family that
// was registered without a builder (docs/adding-an-architecture.md).
Expected<mlir::OwningOpRef<mlir::ModuleOp>> buildModelGraph(mlir::MLIRContext &context,
                                                            const ModelConfig &config,
                                                            const GraphOptions &options) {
  const std::string &arch = config.architecture;
  if (arch == "LlamaForCausalLM" || arch == "MistralForCausalLM" || arch == "Qwen2ForCausalLM" ||
      arch == "GemmaForCausalLM" || arch == "Gemma2ForCausalLM" || arch == "Qwen3ForCausalLM" ||
      arch == "Olmo2ForCausalLM" || arch == "GraniteForCausalLM" || arch == "Phi3ForCausalLM")
    return buildLlamaGraph(context, config, options);
  // Llama-layout families with per-layer RoPE (models/gemma3.h, models/exaone4.h).
  if (arch == "Gemma3ForCausalLM" || arch == "Exaone4ForCausalLM")
    return buildLlamaGraph(context, config, options);
  // Llama under other tensor names, read through derivedTensors (models/exaone.h,
  // models/internlm2.h).
  if (arch == "ExaoneForCausalLM" || arch == "InternLM2ForCausalLM")
    return buildLlamaGraph(context, config, options);
  if (findLayerNormFamily(arch) != nullptr)
    return buildLayerNormGraph(context, config, options);
  return Status::error("internal: architecture '" + arch +
                       "' is registered but has no graph builder in the driver");
}

// The fusion passes to run, in order: none with -O0, else all but those
// --no-fuse names (unknown names are an error that lists the valid ones).
Expected<std::vector<FusionPass>> selectFusions(const BuildOptions &options) {
  std::string valid;
  for (const FusionPass &pass : fusionPasses())
    valid += (valid.empty() ? "" : ", ") + std::string(pass.name);
  for (const std::string &name : options.noFuse)
    if (std::none_of(fusionPasses().begin(), fusionPasses().end(),
                     [&](const FusionPass &pass) { return name == pass.name; }))
      return Status::error("--no-fuse: unknown fusion '" + name + "' (valid: " + valid + ")");
  if (options.optimizationLevel < 0 || options.optimizationLevel > 1)
    return Status::error("-O" + std::to_string(options.optimizationLevel) +
                         " is not supported (-O0: no fusion, -O1: the default)");
  std::vector<FusionPass> selected;
  if (options.optimizationLevel == 0)
    return selected;
  for (const FusionPass &pass : fusionPasses())
    if (std::find(options.noFuse.begin(), options.noFuse.end(), pass.name) == options.noFuse.end())
      selected.push_back(pass);
  return selected;
}

// "qkv, rope": the fusion passes not in `selected`.
std::string skippedFusions(const std::vector<FusionPass> &selected) {
  std::string names;
  for (const FusionPass &pass : fusionPasses())
    if (std::none_of(selected.begin(), selected.end(),
                     [&](const FusionPass &s) { return s.argument == pass.argument; }))
      names += (names.empty() ? "" : ", ") + std::string(pass.name);
  return names;
}

// -v after lowering: the checkpoint tensors the plan does not store (an
// unused lm_head of a tied model, tensors no op reads) and their bytes.
void reportUnstored(const BuildReporter &reporter, const WeightSet &weights,
                    const PlanContents &contents) {
  std::set<std::string> stored;
  for (const auto &tensor : contents.meta.tensors) {
    std::string name = tensor->name; // a concatenation is "a+b+c"
    for (size_t begin = 0, end = 0; begin <= name.size(); begin = end + 1) {
      end = std::min(name.find('+', begin), name.size());
      stored.insert(name.substr(begin, end - begin));
    }
  }
  uint64_t bytes = 0, count = 0;
  std::string names;
  for (const auto &[name, tensor] : weights.all())
    if (!stored.count(name)) {
      bytes += tensor.byteSize;
      ++count;
      names += (names.empty() ? "" : ", ") + name;
    }
  if (count > 0)
    reporter.verbose("prune: " + std::to_string(count) + " checkpoint tensors not stored (" +
                     formatBytes(bytes) + "): " + names);
}

Status runPasses(mlir::MLIRContext &context, mlir::ModuleOp module, const BuildOptions &options,
                 const std::string &stage, const std::function<void(mlir::PassManager &)> &add) {
  mlir::PassManager pm(&context);
  add(pm);
  if (pm.size() == 0)
    return Status::ok();
  if (options.printIrAfterAll || !options.printIrAfter.empty()) {
    std::string only = options.printIrAfter;
    bool all = options.printIrAfterAll;
    pm.enableIRPrinting(
        [](mlir::Pass *, mlir::Operation *) { return false; },
        [all, only](mlir::Pass *pass, mlir::Operation *) {
          return all || pass->getArgument() == only;
        },
        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false,
        /*printAfterOnlyOnFailure=*/false, llvm::errs());
  }
  if (mlir::failed(pm.run(module)))
    return Status::error("stage '" + stage + "' failed (see the diagnostics above)");
  return Status::ok();
}

// The plan loader refuses model.max_seq_len above kMaxPlanSeqLen: refuse
// here, before the build, rather than write a plan that never loads.
Status checkSeqLenFitsRuntime(int64_t maxSeqLen, const BuildOptions &options,
                              const ModelSpec &spec) {
  if (maxSeqLen <= kMaxPlanSeqLen)
    return Status::ok();
  std::string from = options.maxSeqLen > 0
                         ? "--max-seq-len"
                         : spec.configSource + ": max_position_embeddings";
  return Status::error(from + " " + std::to_string(maxSeqLen) +
                       " exceeds the longest sequence the runtime accepts (" +
                       std::to_string(kMaxPlanSeqLen) + "); pass --max-seq-len " +
                       std::to_string(kMaxPlanSeqLen) + " or less");
}

// A token id at or past the model's vocab_size has no embedding row, so a
// tokenizer with more tokens than the model fails every prompt that uses one.
Status checkTokenizerFitsVocab(const Tokenizer &tokenizer, const ModelSpec &spec) {
  if (tokenizer.vocabSize() <= spec.config.vocabSize)
    return Status::ok();
  return Status::error(spec.tokenizerPath + ": the tokenizer has " +
                       std::to_string(tokenizer.vocabSize()) + " token ids but " +
                       spec.configSource + " declares vocab_size " +
                       std::to_string(spec.config.vocabSize) +
                       "; the model has no embedding for the rest (is this the model's own "
                       "tokenizer.json?)");
}

// NaN or Inf in a weight makes every logit NaN at run time: an error naming
// each tensor, or with --allow-nonfinite-weights one warning per tensor.
Status checkFiniteWeights(const ModelConfig &config, const WeightSet &weights,
                          const BuildOptions &options, const BuildReporter &reporter) {
  std::vector<std::string> bad = findNonFiniteWeights(config, weights);
  if (bad.empty())
    return Status::ok();
  if (options.allowNonFiniteWeights) {
    for (const std::string &line : bad)
      reporter.warning(line);
    return Status::ok();
  }
  std::string message = std::to_string(bad.size()) +
                        (bad.size() == 1 ? " weight holds" : " weights hold") +
                        " NaN or infinite values (the plan would generate garbage): ";
  for (size_t i = 0; i < bad.size() && i < kMaxListedWeightProblems; ++i)
    message += (i ? "; " : "") + bad[i];
  if (bad.size() > kMaxListedWeightProblems)
    message += "; ... and " + std::to_string(bad.size() - kMaxListedWeightProblems) + " more";
  return Status::error(message + "; pass --allow-nonfinite-weights to build anyway");
}

// -o must not name one of the build's inputs, however it is spelled: the
// same file (device and inode) through another path, a hard link or a
// symlink is refused before anything is built.
Status checkOutputIsNoInput(const BuildOptions &options, const ModelSpec &spec,
                            const WeightSet *weights) {
  if (options.output.empty())
    return Status::ok();
  struct stat out {};
  if (::stat(options.output.c_str(), &out) != 0)
    return Status::ok(); // nothing there yet (or unreachable: the write will say)
  if (S_ISDIR(out.st_mode))
    return Status::error("-o " + options.output +
                         ": is a folder; pass the plan file's name, e.g. " +
                         (std::filesystem::path(options.output) / "engine.plan").string());
  std::vector<std::string> inputs = {options.input,  spec.configSource, spec.tokenizerPath,
                                     spec.weightIndex, options.calibFile};
  inputs.insert(inputs.end(), spec.weightFiles.begin(), spec.weightFiles.end());
  if (weights != nullptr)
    for (const SafetensorsFile &file : weights->files())
      inputs.push_back(file.path());
  for (const std::string &input : inputs) {
    struct stat in {};
    if (input.empty() || ::stat(input.c_str(), &in) != 0)
      continue;
    if (in.st_dev == out.st_dev && in.st_ino == out.st_ino)
      return Status::error("-o " + options.output + " is the build's input " + input +
                           " (the same file); writing the plan there would destroy it: choose "
                           "another output path");
  }
  return Status::ok();
}

// The plan's creation time: $SOURCE_DATE_EPOCH when set (reproducible
// builds, https://reproducible-builds.org/specs/source-date-epoch/), else now.
Expected<int64_t> buildTimestamp() {
  const char *epoch = std::getenv("SOURCE_DATE_EPOCH");
  if (epoch == nullptr || *epoch == '\0')
    return static_cast<int64_t>(std::time(nullptr));
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(epoch, &end, 10);
  if (errno != 0 || *end != '\0' || value < 0)
    return Status::error("SOURCE_DATE_EPOCH='" + std::string(epoch) +
                         "' is not a non-negative integer (seconds since 1970-01-01 UTC)");
  return static_cast<int64_t>(value);
}

// The model as the provenance names it: the folder's name (a config file:
// "<folder>/<file>"), never an absolute or working-directory-relative path,
// so the same model built from anywhere gives the same plan.
std::string provenanceModelName(const std::string &input) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path path = fs::weakly_canonical(fs::path(input), ec);
  if (ec)
    path = fs::path(input).lexically_normal();
  if (!path.has_filename())
    path = path.parent_path();
  if (fs::is_directory(path, ec))
    return path.filename().string();
  return (path.parent_path().filename() / path.filename()).string();
}

// The options that shape the plan, in one fixed spelling and order (no
// input or output path, nothing that only changes messages), e.g.
// "--dtype f16 --target cpu -O0 --quantize awq --group-size 64 --calib calib.txt".
std::string provenanceOptions(const BuildOptions &o) {
  std::ostringstream s;
  if (!o.dtype.empty())
    s << " --dtype " << o.dtype;
  if (o.maxSeqLen > 0)
    s << " --max-seq-len " << o.maxSeqLen;
  if (o.syntheticSeed)
    s << " --synthetic-weights=" << *o.syntheticSeed;
  if (!o.targets.empty())
    s << " --target " << o.targets;
  s << " -O" << o.optimizationLevel;
  for (const std::string &name : o.noFuse)
    s << " --no-fuse " << name;
  if (!o.quantize.empty()) {
    s << " --quantize " << o.quantize << " --group-size " << o.groupSize;
    if (!o.calibFile.empty())
      s << " --calib " << std::filesystem::path(o.calibFile).filename().string()
        << " --calib-tokens " << o.calibTokens;
    if (o.awqClip)
      s << " --awq-clip";
    if (!o.mixed.empty())
      s << " --mixed " << o.mixed;
    if (o.quantizeLmHead)
      s << " --quantize-lm-head" << (o.lmHeadFormat.empty() ? "" : "=" + o.lmHeadFormat);
  }
  if (o.allowNonFiniteWeights)
    s << " --allow-nonfinite-weights";
  return s.str().substr(1);
}

// Whether --quantize-lm-head makes the head int8: asked for, or by default
// in an int8 plan.
bool lmHeadIsInt8(const BuildOptions &o) {
  return o.lmHeadFormat == "int8" || (o.lmHeadFormat.empty() && o.quantize == "int8");
}

} // namespace

Status runBuild(const BuildOptions &options, const BuildReporter &reporter) {
  StageRunner stages(options, reporter);
  auto start = Clock::now();
  if (options.quantizeLmHead && options.quantize.empty())
    return Status::error("--quantize-lm-head quantizes the lm_head like the linear layers: give "
                         "--quantize rtn, awq, gptq or int8 too");
  if (!options.lmHeadFormat.empty() && options.lmHeadFormat != "int4" &&
      options.lmHeadFormat != "int8")
    return Status::error("--quantize-lm-head=" + options.lmHeadFormat +
                         ": the head's format must be int4 or int8");
  if (!options.lmHeadFormat.empty() && !options.quantizeLmHead)
    return Status::error("internal: lmHeadFormat '" + options.lmHeadFormat +
                         "' without quantizeLmHead");
  const bool int8Head = lmHeadIsInt8(options);
  if (options.quantizeLmHead && !int8Head && options.quantize == "int8" &&
      !hd::q4ValidGroupSize(options.groupSize))
    return Status::error("--quantize-lm-head=int4 with --quantize int8: the head's int4 groups "
                         "come from --group-size, which is " + std::to_string(options.groupSize) +
                         "; give --group-size 32, 64 or 128");
  if (options.quantizeLmHead && int8Head && options.syntheticSeed)
    return Status::error("--quantize-lm-head" +
                         std::string(options.lmHeadFormat.empty() ? " with --quantize int8"
                                                                  : "=int8") +
                         " needs checkpoint weights, not --synthetic-weights (use int4, or a "
                         "checkpoint)");

  // --- import: spec, weights, tokenizer, IR.
  SpecOptions specOptions;
  specOptions.requireWeights = !options.syntheticSeed.has_value();
  LLMC_ASSIGN_OR_RETURN(ModelSpec spec, loadModelSpec(options.input, specOptions));
  const ModelConfig &config = spec.config;
  std::string dtype = options.dtype.empty() ? spec.dtype : options.dtype;
  // Dynamic NTK exists to run past max_position_embeddings: its plans reach
  // max_position_embeddings * factor, the length its scaling is meant for.
  const bool dynamic = config.ropeScaling.kind == RopeScaling::Kind::Dynamic;
  const int64_t longest =
      dynamic ? static_cast<int64_t>(config.maxPositionEmbeddings * config.ropeScaling.factor)
              : config.maxPositionEmbeddings;
  // A Hugging Face directory's spec says max_position_embeddings; for a
  // dynamic model that default widens to `longest` too.
  const bool specDefault = spec.maxSeqLen == 0 || (dynamic && spec.maxSeqLen == config.maxPositionEmbeddings);
  int64_t maxSeqLen = options.maxSeqLen > 0 ? options.maxSeqLen
                      : !specDefault        ? spec.maxSeqLen
                                            : longest;
  if (maxSeqLen > longest)
    return Status::error("--max-seq-len " + std::to_string(maxSeqLen) + " exceeds the model's " +
                         (dynamic ? "max_position_embeddings * rope_scaling.factor "
                                  : "max_position_embeddings ") +
                         std::to_string(longest));
  LLMC_RETURN_IF_ERROR(checkSeqLenFitsRuntime(maxSeqLen, options, spec));

  std::optional<WeightSet> weights;
  if (!options.syntheticSeed) {
    LLMC_ASSIGN_OR_RETURN(WeightSet opened, openModelWeights(spec));
    std::vector<std::string> warnings;
    LLMC_RETURN_IF_ERROR(checkWeights(config, opened, &warnings, spec.configSource));
    for (const std::string &w : warnings)
      reporter.warning(w);
    LLMC_RETURN_IF_ERROR(checkFiniteWeights(config, opened, options, reporter));
    LLMC_RETURN_IF_ERROR(addDerivedTensors(config, opened));
    weights = std::move(opened);
  }
  LLMC_ASSIGN_OR_RETURN(std::string tokenizerJson, readTextFile(spec.tokenizerPath));
  LLMC_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::fromJson(tokenizerJson, spec.tokenizerPath));
  LLMC_RETURN_IF_ERROR(checkTokenizerFitsVocab(tokenizer, spec));
  if (!options.emitMlir)
    LLMC_RETURN_IF_ERROR(checkOutputIsNoInput(options, spec, weights ? &*weights : nullptr));
  LLMC_ASSIGN_OR_RETURN(int64_t createdUnix, buildTimestamp());

  mlir::MLIRContext context;
  context.disableMultithreading();
  context.loadDialect<llm::LlmDialect, mlir::func::FuncDialect>();
  LLMC_ASSIGN_OR_RETURN(mlir::Type matrixType, matrixElementType(context, dtype));
  LLMC_ASSIGN_OR_RETURN(mlir::OwningOpRef<mlir::ModuleOp> module,
                        buildModelGraph(context, config, GraphOptions{matrixType}));
  {
    std::ostringstream detail;
    detail << config.architecture << ": " << config.numLayers << " layers, hidden "
           << config.hiddenSize << ", heads " << config.numHeads << "/" << config.numKvHeads
           << ", vocab " << config.vocabSize << " (" << tokenizer.vocabSize()
           << " tokens); " << countOps(*module) << " ops";
    stages.finish("import", start, *module, detail.str());
  }
  reporter.verbose(describeWeights(*module));
  if (options.emitMlir) {
    reporter.ir(printIr(*module));
    return Status::ok();
  }

  // --- prune: drop what the outputs do not need, merge duplicate weights.
  start = Clock::now();
  size_t opsBefore = countOps(*module);
  PruneReport pruned;
  LLMC_RETURN_IF_ERROR(runPasses(context, *module, options, "prune", [&](mlir::PassManager &pm) {
    pm.addPass(createLlmPrune(&pruned));
    pm.addPass(mlir::createCanonicalizerPass());
    pm.addPass(mlir::createCSEPass());
  }));
  size_t opsRemoved = opsBefore - countOps(*module);
  stages.finish("prune", start, *module,
                std::to_string(opsRemoved) + " ops removed, " +
                    std::to_string(pruned.droppedWeights.size()) + " weights (" +
                    formatBytes(pruned.droppedBytes()) + ") no longer needed");
  reportPrune(reporter, pruned, opsRemoved);

  // --- quantize: int4 weights (RTN, or AWQ with calibration), before fusion
  // so that the fusion passes see the int4 linears.
  start = Clock::now();
  LLMC_ASSIGN_OR_RETURN(QuantizeOutcome quantized,
                        prepareQuantization(*module, weights ? &*weights : nullptr, tokenizer,
                                            maxSeqLen, options, reporter));
  if (options.quantize.empty() || options.quantize == "int8") {
    stages.finish("quantize", start, *module,
                  options.quantize.empty() ? "not requested" : "int8: after lowering");
    reporter.verbose("quantize: nothing to do (no quantization requested)");
  } else {
    std::string summary;
    LLMC_RETURN_IF_ERROR(runPasses(context, *module, options, "quantize",
                                   [&](mlir::PassManager &pm) {
                                     pm.addPass(createLlmQuantize(quantized.config, &summary));
                                   }));
    stages.finish("quantize", start, *module, summary);
    reporter.info("quantize: " + quantized.detail);
    for (const std::string &line : describeQuantization(quantized))
      reporter.verbose(line);
  }

  // --- fuse: the fusion passes that -O and --no-fuse leave on.
  start = Clock::now();
  LLMC_ASSIGN_OR_RETURN(std::vector<FusionPass> fusions, selectFusions(options));
  std::vector<std::string> fused(fusions.size());
  LLMC_RETURN_IF_ERROR(runPasses(context, *module, options, "fuse", [&](mlir::PassManager &pm) {
    for (size_t i = 0; i < fusions.size(); ++i)
      pm.addPass(fusions[i].create(&fused[i]));
  }));
  stages.finish("fuse", start, *module,
                fusions.empty() ? "disabled" : std::to_string(countOps(*module)) + " ops left");
  if (fusions.size() < fusionPasses().size())
    reporter.verbose("fuse: skipped " + skippedFusions(fusions) + " (-O0 or --no-fuse)");
  for (size_t i = 0; i < fusions.size(); ++i)
    reporter.verbose(std::string("fuse: ") + fusions[i].argument + ": " + fused[i]);

  // --- lower: program + memory plan, then the plan file.
  start = Clock::now();
  LoweringOptions lowering;
  lowering.config = &config;
  lowering.maxSeqLen = maxSeqLen;
  lowering.tokenizerJson = tokenizerJson;
  lowering.syntheticSeed = options.syntheticSeed;
  if (weights) {
    const WeightSet &set = *weights;
    lowering.resolveWeight = [&set](const std::string &name) -> Expected<WeightSource> {
      const TensorView *t = set.find(name);
      if (t == nullptr)
        return Status::error("weight '" + name + "' is not in the checkpoint");
      uint64_t elements = t->byteSize / dtypeSize(t->dtype);
      return WeightSource{t->data, t->dtype, elements, {}};
    };
  }
  if (quantized.source) { // it serves every tensor, synthetic ones materialized
    lowering.syntheticSeed.reset();
    lowering.resolveWeight = quantized.weightResolver();
  }
  lowering.llmcVersion = LLMC_VERSION;
  lowering.sourceModel = provenanceModelName(options.input);
  lowering.sourceHash = sourceHash(spec, tokenizerJson, weights ? &*weights : nullptr);
  lowering.buildOptions = provenanceOptions(options);
  LLMC_ASSIGN_OR_RETURN(TargetSelection targets, parseTargets(options.targets));
  LLMC_ASSIGN_OR_RETURN(PlanContents contents, lowerToPlan(*module, lowering));
  contents.meta.provenance->created_unix = createdUnix;
  recordGenerationSettings(spec.generation, contents.meta);
  const fb::ProgramT &program = *contents.meta.programs.front();
  stages.finish("lower", start, mlir::ModuleOp(),
                std::to_string(program.steps.size()) + " steps per token, " +
                    std::to_string(program.buffers.size()) + " buffers in " +
                    std::to_string(program.arena_bytes_per_token) + " arena bytes per token");
  if (weights)
    reportUnstored(reporter, *weights, contents);

  // --- int8 (W8A16): the Linear matrices of the lowered plan (quantize/int8.h).
  std::vector<std::vector<uint8_t>> int8Storage; // the new tensors' bytes, until written
  if (!options.mixed.empty()) { // --mixed: the linears its recipe names int8
    LLMC_ASSIGN_OR_RETURN(std::string line, quantizeMixedInt8(quantized, contents, int8Storage));
    reporter.info("quantize: " + line);
  }
  if (options.quantize == "int8") { // GPU programs follow from the quantized CPU program
    ThreadPool pool(0);
    LLMC_ASSIGN_OR_RETURN(int matrices,
                          quant::quantizePlanLinearsQ8(pool, contents, options.groupSize,
                                                       int8Storage));
    reporter.info("quantize: int8 " +
                  std::string(options.groupSize > 0
                                  ? "in groups of " + std::to_string(options.groupSize) +
                                        " (f16 scales)"
                                  : "per output channel (f32 scales)") +
                  ", " + std::to_string(matrices) + " Linear matrices");
  }

  // --- --quantize-lm-head: the Logits / LmHead matrix (quantize/lm_head.h).
  if (options.quantizeLmHead) {
    if (!targets.gpu.empty() && !targets.byDefault)
      return Status::error("--quantize-lm-head runs on the CPU backend only for now (the CUDA "
                           "head kernels read float weights); build with --target cpu");
    if (!targets.gpu.empty())
      reporter.warning("--quantize-lm-head: CPU programs only (the CUDA head kernels read float "
                       "weights)");
    targets.gpu.clear();
    ThreadPool pool(0);
    const bool int8 = int8Head;
    // int4 plans' --group-size is the int4 one: their int8 head has a scale
    // per output channel (f32), as --quantize int8 by default.
    const int64_t headGroup = int8 && options.quantize != "int8" ? 0 : options.groupSize;
    LLMC_ASSIGN_OR_RETURN(
        quant::LmHeadQuantization head,
        quant::quantizePlanLmHead(pool, contents,
                                  int8 ? fb::WeightFormat::Q8 : fb::WeightFormat::Q4, headGroup,
                                  int8Storage));
    reporter.info("quantize: lm_head " +
                  std::string(int8 ? (headGroup > 0 ? "int8 in groups of " +
                                                          std::to_string(headGroup)
                                                    : "int8 per output channel")
                                   : "int4 RTN") +
                  ", " +
                  std::to_string(head.matrices) + " matrix (" + std::to_string(head.floatBytes) +
                  " B -> " + std::to_string(head.quantizedBytes) + " B), " +
                  std::to_string(head.steps) + " steps");
  }

  LLMC_RETURN_IF_ERROR(runGpuStage(targets, contents, options, reporter));

  start = Clock::now();
  LLMC_ASSIGN_OR_RETURN(WriteSummary written,
                        writePlan(options.output, contents, reporter.progress));
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::ostringstream done;
  done << "wrote " << options.output << ": " << formatBytes(written.fileSize) << " ("
       << contents.meta.tensors.size() << " tensors, weights " << dtype
       << (contents.meta.synthetic ? ", synthetic" : "") << ", metadata "
       << formatBytes(written.metadataSize) << ") in " << seconds << " s";
  reporter.info(done.str());
  if (!options.mixed.empty() && quantized.parameters > 0) {
    char perWeight[32];
    std::snprintf(perWeight, sizeof(perWeight), "%.3f",
                  static_cast<double>(written.weightsSize) /
                      static_cast<double>(quantized.parameters));
    reporter.info("quantize: mixed plan weights " + std::to_string(written.weightsSize) +
                  " B for " + std::to_string(quantized.parameters) + " parameters, " + perWeight +
                  " B per weight");
  }
  return Status::ok();
}

} // namespace llmc
