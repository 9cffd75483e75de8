// Architecture goldens: tiny random-weight checkpoints of each supported HF
// family (tests/data/hf/<name>, written by tests/data/hf/generate.py with
// transformers, an independent implementation), built into plans by the
// llmc driver and run by the CPU engine:
//   - f32 plans: every position's logits within 1e-4 of transformers' over
//     the prefill, token by token, and over 64 greedy decode steps after
//     the prefill, with identical greedy ids;
//   - bf16 plans: within 2e-5 or 5e-5 (see kBf16Tolerance) of transformers run in
//     f32 on the same bf16-rounded matrices (logits-bf16.f32), greedy ids
//     identical too.
#include "common/compare.h"
#include "common/test_paths.h"
#include "cpu/isa.h"
#include "driver/build.h"
#include "engine/engine.h"
#include "support/json.h"
#include "support/mapped_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

namespace llmc {
namespace {

constexpr double kF32Tolerance = 1e-4;
// Issue #12 asks for 2e-5. Both sides compute in f32 on the same bf16
// matrices, so what is left is f32 rounding order, and that alone is of
// this size: against float64 on the same matrices transformers' own f32
// reference is off by up to 5.0e-5 (phi3-longrope-long) and llmc by up to
// 4.5e-5 (long-dynamic), and llmc's distance to the reference moves by up to
// 46% between its scalar, AVX2 and AVX-512 summation orders (measured in
// docs/architectures.md "The bf16 tolerance", tests/data/hf/precision.py).
// So 2e-5 holds for the fixtures below, whose worst over those three orders
// is under 1.8e-5; every other one (new fixtures included, until measured)
// keeps 5e-5.
constexpr double kBf16Tolerance = 2e-5;
constexpr double kBf16NoiseTolerance = 5e-5;
double bf16ToleranceFor(const std::string &name) {
  static const std::set<std::string> kWithin2e5 = {
      "qwen2", "llama-linear-legacy", "llama-dynamic", "llama-dynamic-legacy", "gemma", "gemma2",
      "mistral-window", "olmo2", "llama-yarn-legacy", "qwen3", "granite", "starcoder2", "stablelm",
      "cohere", "phi", "gpt-neox", "gemma3", "exaone4"};
  return kWithin2e5.count(name) ? kBf16Tolerance : kBf16NoiseTolerance;
}

// HF's reference for one plan dtype. Rows [0, prefillRows.size()) are the
// prefill of `ids` at positions prefillRows (every position, or the last few
// of a long-context fixture's prompt); row prefillRows.size() + i holds the
// logits after feeding decodeIds[i].
struct Reference {
  std::vector<int32_t> ids;
  std::vector<size_t> prefillRows; // positions of ids whose logits are stored, ascending
  std::vector<int32_t> decodeIds;  // decodeIds[0] = argmax of the last prefill row, ...
  std::vector<int32_t> greedyNext; // argmax of each stored row
  int64_t vocab = 0;
  std::vector<float> logits;

  size_t rows() const { return prefillRows.size() + decodeIds.size(); }
  const float *row(size_t r) const { return logits.data() + r * vocab; }
};

// `suffix` "" for the f32 reference, "_bf16" for the bf16 one.
Reference loadReference(const std::string &name, const std::string &suffix) {
  Reference ref;
  auto text = readTextFile(test::testDataPath("hf/" + name + "/logits.json"));
  EXPECT_TRUE(text.isOk()) << text.message();
  auto json = parseJson(text.isOk() ? *text : "{}", name + "/logits.json");
  EXPECT_TRUE(json.isOk()) << json.message();
  if (!text.isOk() || !json.isOk())
    return ref;
  ref.ids = (*json)["ids"].get<std::vector<int32_t>>();
  if (json->contains("prefill_rows")) {
    ref.prefillRows = (*json)["prefill_rows"].get<std::vector<size_t>>();
    for (size_t r : ref.prefillRows)
      EXPECT_LT(r, ref.ids.size());
  } else {
    for (size_t r = 0; r < ref.ids.size(); ++r)
      ref.prefillRows.push_back(r);
  }
  ref.decodeIds = (*json)["decode_ids" + suffix].get<std::vector<int32_t>>();
  ref.greedyNext = (*json)["greedy_next" + suffix].get<std::vector<int32_t>>();
  ref.vocab = (*json)["shape"][1].get<int64_t>();
  EXPECT_EQ((*json)["shape"][0].get<size_t>(), ref.rows());
  EXPECT_EQ(ref.greedyNext.size(), ref.rows());
  std::string file = (*json)["logits" + suffix].get<std::string>();
  auto raw = MappedFile::open(test::testDataPath("hf/" + name + "/" + file));
  EXPECT_TRUE(raw.isOk()) << raw.message();
  if (!raw.isOk())
    return ref;
  EXPECT_EQ(raw->size(), ref.rows() * ref.vocab * sizeof(float));
  const float *data = reinterpret_cast<const float *>(raw->data());
  ref.logits.assign(data, data + raw->size() / sizeof(float));
  return ref;
}

// Builds (once per test binary) the `dtype` plan of tests/data/hf/<name>
// (`quantize` "rtn": int4 linear weights in groups of 32); "" on failure.
std::string planFor(const std::string &name, const std::string &dtype,
                    const std::string &quantize = "") {
  static std::map<std::string, std::string> built;
  const std::string key = name + "." + dtype + (quantize.empty() ? "" : "." + quantize);
  if (auto it = built.find(key); it != built.end())
    return it->second;
  BuildOptions options;
  options.input = test::testDataPath("hf/" + name);
  options.output = test::scratchDir("hf-" + key) + "/" + key + ".plan";
  options.dtype = dtype;
  options.targets = "cpu"; // the CPU backend's logits: no GPU kernels to compile
  if (!quantize.empty()) {
    options.quantize = quantize;
    options.groupSize = 32;
  }
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  Status status = runBuild(options, quiet);
  EXPECT_TRUE(status.isOk()) << status.message();
  return built[key] = status.isOk() ? options.output : "";
}

std::unique_ptr<Engine> buildAndLoad(const std::string &name, const std::string &dtype,
                                     const std::string &quantize = "") {
  std::string plan = planFor(name, dtype, quantize);
  if (plan.empty())
    return nullptr;
  auto engine = Engine::load(plan, EngineOptions{});
  EXPECT_TRUE(engine.isOk()) << engine.message();
  return engine.isOk() ? std::move(*engine) : nullptr;
}

int32_t argmax(const float *row, int64_t vocab) {
  return static_cast<int32_t>(std::max_element(row, row + vocab) - row);
}

// Max |ours - HF| over reference row `r`; also checks its greedy token
// unless `checkGreedy` is false.
double compareRow(const Reference &ref, size_t r, const float *row, bool checkGreedy = true) {
  double maxDiff = test::maxAbsDiff(row, ref.row(r), ref.vocab).maxAbs; // +inf on a NaN
  if (checkGreedy)
    EXPECT_EQ(argmax(row, ref.vocab), ref.greedyNext[r]) << "row " << r;
  return maxDiff;
}

// With $LLMC_HF_DUMP_DIR set, our rows of a prefill + decode comparison go
// to <dir>/<name>.<tag>.f32 (float32, [rows, vocab], as logits.f32): a
// diagnostic for comparing llmc with transformers run in float64, whose own
// f32 rounding is of the size of the bf16 tolerance (docs/architectures.md).
void dumpRows(const std::string &name, const std::string &tag, const std::vector<float> &rows) {
  const char *dir = std::getenv("LLMC_HF_DUMP_DIR");
  if (dir == nullptr || rows.empty())
    return;
  std::string path = std::string(dir) + "/" + name + "." + tag + ".f32";
  if (FILE *f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(rows.data(), sizeof(float), rows.size(), f);
    std::fclose(f);
  }
}

// Prefills the prompt, then feeds HF's greedy ids one by one (HF's, so one
// differing choice is reported once rather than derailing every later
// step), comparing every row. Returns the max difference; `ours` gets our rows.
double prefillThenDecode(Engine &engine, const Reference &ref, std::vector<float> *ours = nullptr,
                         bool checkGreedy = true) {
  SequenceId seq = engine.addSequence();
  auto prefill = engine.step({{seq, ref.ids}}, /*allLogits=*/true);
  EXPECT_TRUE(prefill.isOk()) << prefill.message();
  if (!prefill.isOk())
    return INFINITY;
  double maxDiff = 0.0;
  for (size_t k = 0; k < ref.prefillRows.size(); ++k) {
    const float *row = *prefill + ref.prefillRows[k] * ref.vocab;
    maxDiff = std::max(maxDiff, compareRow(ref, k, row, checkGreedy));
    if (ours != nullptr)
      ours->insert(ours->end(), row, row + ref.vocab);
  }
  for (size_t i = 0; i < ref.decodeIds.size(); ++i) {
    auto logits = engine.step({{seq, {ref.decodeIds[i]}}}, /*allLogits=*/true);
    EXPECT_TRUE(logits.isOk()) << logits.message();
    if (!logits.isOk())
      return INFINITY;
    maxDiff = std::max(maxDiff, compareRow(ref, ref.prefillRows.size() + i, *logits, checkGreedy));
    if (ours != nullptr)
      ours->insert(ours->end(), *logits, *logits + ref.vocab);
  }
  return maxDiff;
}

class HfLogits : public ::testing::TestWithParam<const char *> {
protected:
  void SetUp() override {
    ref_ = loadReference(GetParam(), "");
    ASSERT_FALSE(ref_.logits.empty());
    ASSERT_TRUE(test::allFinite(ref_.logits.data(), ref_.logits.size())) << GetParam();
    ASSERT_EQ(ref_.decodeIds.size(), 64u) << "the issue asks for 64 greedy decode steps";
    engine_ = buildAndLoad(GetParam(), "f32");
    ASSERT_NE(engine_, nullptr);
    ASSERT_EQ(engine_->vocabSize(), ref_.vocab);
    // The length at which a dynamic/longrope fixture's frequencies change.
    auto text = readTextFile(test::testDataPath(std::string("hf/") + GetParam() + "/config.json"));
    ASSERT_TRUE(text.isOk()) << text.message();
    auto config = parseJson(*text, "config.json");
    ASSERT_TRUE(config.isOk()) << config.message();
    const Json &c = *config;
    const Json &rope = c.contains("rope_scaling") && c["rope_scaling"].is_object()
                           ? c["rope_scaling"]
                           : c.value("rope_parameters", Json::object());
    const std::string type = rope.value("rope_type", rope.value("type", std::string("default")));
    if (type == "dynamic")
      ropeSwitchLength_ = c["max_position_embeddings"].get<size_t>();
    else if (type == "longrope")
      ropeSwitchLength_ = c.contains("original_max_position_embeddings")
                              ? c["original_max_position_embeddings"].get<size_t>()
                              : rope["original_max_position_embeddings"].get<size_t>();
  }

  void report(const char *mode, size_t rows, double maxDiff, double tolerance) {
    EXPECT_LT(maxDiff, tolerance) << mode;
    std::printf("%s %s: max |logit - HF| over %zu rows: %.3g\n", GetParam(), mode, rows, maxDiff);
  }

  Reference ref_;
  std::unique_ptr<Engine> engine_;
  size_t ropeSwitchLength_ = 0; // 0: frequencies independent of the length
};

TEST_P(HfLogits, ReferenceLogitsDifferBetweenPositions) {
  // Guards the data: identical rows would hide position (RoPE, mask) bugs.
  for (size_t t = 1; t < ref_.rows(); ++t) {
    // SetUp checked the logits are finite, so a NaN cannot pass as "differs".
    double diff = test::maxAbsDiff(ref_.row(t), ref_.row(t - 1), ref_.vocab).maxAbs;
    EXPECT_GT(diff, 0.1) << "rows " << t - 1 << " and " << t;
  }
}

TEST_P(HfLogits, PrefillMatchesHfAtEveryPosition) {
  SequenceId seq = engine_->addSequence();
  auto logits = engine_->step({{seq, ref_.ids}}, /*allLogits=*/true);
  ASSERT_TRUE(logits.isOk()) << logits.message();
  double maxDiff = 0.0;
  for (size_t k = 0; k < ref_.prefillRows.size(); ++k)
    maxDiff = std::max(maxDiff, compareRow(ref_, k, *logits + ref_.prefillRows[k] * ref_.vocab));
  report("prefill", ref_.prefillRows.size(), maxDiff, kF32Tolerance);
}

TEST_P(HfLogits, DecodeTokenByTokenMatchesHfAtEveryPosition) {
  // Dynamic NTK and longrope pick frequencies per forward pass, and cached
  // keys keep the rotation of the pass that wrote them: feeding tokens one
  // at a time computes what HF's one-pass prefill (length n) does only while
  // every pass stays within the length where the frequencies change.
  const size_t n = ref_.ids.size();
  auto samePass = [&](size_t t) {
    return ropeSwitchLength_ == 0 || (t + 1 <= ropeSwitchLength_ && n <= ropeSwitchLength_);
  };
  if (!samePass(ref_.prefillRows.front())) {
    std::printf("%s token by token: not comparable (a %zu-token prefill passes the length %zu "
                "where its RoPE frequencies change)\n",
                GetParam(), n, ropeSwitchLength_);
    return;
  }
  SequenceId seq = engine_->addSequence();
  double maxDiff = 0.0;
  size_t compared = 0;
  for (size_t t = 0, k = 0; t < n; ++t) {
    auto logits = engine_->step({{seq, {ref_.ids[t]}}}, /*allLogits=*/true);
    ASSERT_TRUE(logits.isOk()) << logits.message();
    if (k < ref_.prefillRows.size() && ref_.prefillRows[k] == t) {
      if (samePass(t)) {
        maxDiff = std::max(maxDiff, compareRow(ref_, k, *logits));
        ++compared;
      }
      ++k;
    }
  }
  ASSERT_GT(compared, 0u);
  report("token by token", compared, maxDiff, kF32Tolerance);
}

TEST_P(HfLogits, GreedyDecodeOf64StepsMatchesHf) {
  std::vector<float> ours;
  report("prefill + 64 greedy steps", ref_.rows(), prefillThenDecode(*engine_, ref_, &ours),
         kF32Tolerance);
  dumpRows(GetParam(), "f32", ours);
}

// The plan's math on bf16 weights with f32 activations, as the reference
// computes it: on a CPU with AVX512-BF16 the bf16 dot-product kernels, which
// round the activations to bf16, are off for this comparison.
TEST_P(HfLogits, Bf16PlanMatchesHfOnBf16RoundedMatrices) {
  Reference ref16 = loadReference(GetParam(), "_bf16");
  ASSERT_FALSE(ref16.logits.empty());
  ASSERT_TRUE(test::allFinite(ref16.logits.data(), ref16.logits.size())) << GetParam();
  std::unique_ptr<Engine> engine = buildAndLoad(GetParam(), "bf16");
  ASSERT_NE(engine, nullptr);
  const bool bf16Dot = cpu::x86Bf16Active();
  cpu::setX86Bf16ForTesting(false);
  std::vector<float> ours;
  const double maxDiff = prefillThenDecode(*engine, ref16, &ours);
  cpu::setX86Bf16ForTesting(bf16Dot);
  report("bf16 prefill + 64 greedy steps", ref16.rows(), maxDiff, bf16ToleranceFor(GetParam()));
  dumpRows(GetParam(), "bf16", ours);
}

// With the bf16 dot-product kernels (activations rounded to bf16 before each
// bf16 matrix): near the reference, not on it. Measured on a Zen 4: 0.017
// (granite) to 0.36 (phi3-longrope-long), logits' std ~1.7; the greedy ids of
// near-ties may differ, so they are not compared. A wrong kernel lands units
// away.
TEST_P(HfLogits, Bf16PlanWithBf16ActivationsStaysNearHf) {
  if (!cpu::x86Bf16Active())
    GTEST_SKIP() << "this CPU has no AVX512-BF16: bf16 weights take f32 activations";
  Reference ref16 = loadReference(GetParam(), "_bf16");
  ASSERT_FALSE(ref16.logits.empty());
  std::unique_ptr<Engine> engine = buildAndLoad(GetParam(), "bf16");
  ASSERT_NE(engine, nullptr);
  report("bf16 activations, prefill + 64 greedy steps", ref16.rows(),
         prefillThenDecode(*engine, ref16, nullptr, /*checkGreedy=*/false), 0.6);
}

TEST_P(HfLogits, Int4RtnPlanBuildsAndStaysNearHf) {
  // int4 weights move the logits, so only a loose bound: finite everywhere,
  // and within a few units of transformers' f32 logits (std ~1.7 here; measured
  // worst 4.1, on llama-linear-legacy; a wrong kernel lands far beyond 8).
  std::unique_ptr<Engine> engine = buildAndLoad(GetParam(), "bf16", "rtn");
  ASSERT_NE(engine, nullptr);
  SequenceId seq = engine->addSequence();
  auto logits = engine->step({{seq, ref_.ids}}, /*allLogits=*/true);
  ASSERT_TRUE(logits.isOk()) << logits.message();
  const size_t last = ref_.prefillRows.back();
  const float *row = *logits + last * ref_.vocab;
  ASSERT_TRUE(test::allFinite(row, ref_.vocab));
  double maxDiff = test::maxAbsDiff(row, ref_.row(ref_.prefillRows.size() - 1), ref_.vocab).maxAbs;
  EXPECT_LT(maxDiff, 8.0);
  std::printf("%s int4 rtn (group 32): max |logit - HF f32| on the last prefill row: %.3g\n",
              GetParam(), maxDiff);
}

INSTANTIATE_TEST_SUITE_P(Families, HfLogits,
                         ::testing::Values("llama3-rope", "mistral", "qwen2", "llama-tied-bias",
                                           "llama-plain", "llama-linear", "llama-linear-legacy",
                                           "llama-dynamic", "llama-dynamic-legacy", "gemma",
                                           "gemma2", "mistral-window", "qwen2-window", "olmo2",
                                           "long-linear", "long-llama3", "llama-yarn",
                                           "llama-yarn-legacy", "long-yarn", "qwen3",
                                           "llama-longrope", "long-longrope"),
                         [](const auto &info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Without fusion, Granite's scaled o_proj and down_proj are plain Linear
// steps (output_scale, no accumulate) followed by Add steps: the other path
// of the CPU linear's scaled product.
TEST(HfLogitsUnfused, GraniteWithoutFusionMatchesHf) {
  Reference ref = loadReference("granite", "");
  ASSERT_FALSE(ref.logits.empty());
  BuildOptions options;
  options.input = test::testDataPath("hf/granite");
  options.output = test::scratchDir("hf-granite-O0") + "/granite.O0.plan";
  options.dtype = "f32";
  options.optimizationLevel = 0;
  BuildReporter quiet;
  quiet.info = quiet.warning = quiet.verbose = quiet.ir = [](const std::string &) {};
  Status status = runBuild(options, quiet);
  ASSERT_TRUE(status.isOk()) << status.message();
  auto engine = Engine::load(options.output, EngineOptions{});
  ASSERT_TRUE(engine.isOk()) << engine.message();
  double maxDiff = prefillThenDecode(**engine, ref);
  EXPECT_LT(maxDiff, kF32Tolerance);
  std::printf("granite -O0 prefill + 64 greedy steps: max |logit - HF| over %zu rows: %.3g\n",
              ref.rows(), maxDiff);
}

// Llama-layout families with multipliers (Granite) or packed projections
// (Phi-3), and Llama's mlp_bias.
INSTANTIATE_TEST_SUITE_P(LlamaLayoutExtras, HfLogits,
                         ::testing::Values("granite", "llama-mlp-bias", "phi3-longrope-short",
                                           "phi3-longrope-long"),
                         [](const auto &info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Past 2048 positions: partial rotary (StableLM rotating 8 of 16 features)
// and dynamic NTK, whose base regrows at every decode step.
INSTANTIATE_TEST_SUITE_P(LongContextExtras, HfLogits,
                         ::testing::Values("long-partial", "long-dynamic"), [](const auto &info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// The LayerNorm families (models/layer_norm_family.h): LayerNorm with and
// without bias, parallel blocks, plain GELU MLPs, partial and interleaved
// rotary, GPT-NeoX's packed qkv split at import, lm_head bias, logit scale.
INSTANTIATE_TEST_SUITE_P(LayerNormFamilies, HfLogits,
                         ::testing::Values("starcoder2", "stablelm", "cohere", "phi", "gpt-neox"),
                         [](const auto &info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Hybrid sliding/global layers with per-layer RoPE (ModelConfig::layerRopes):
// Gemma3's local and global bases, EXAONE 4's NoPE global layers; both with
// per-head q/k norms.
INSTANTIATE_TEST_SUITE_P(PerLayerRopeFamilies, HfLogits, ::testing::Values("gemma3", "exaone4"),
                         [](const auto &info) { return std::string(info.param); });

// Checkpoints under their publishers' config and tensor names: EXAONE 3.x
// (Llama as transformers 5.24 reads LG's layout; 3.0's untied form and
// 3.5's tied one with llama3 RoPE) and InternLM2 (packed wqkv; reference:
// InternLM's remote code; GQA with dynamic NTK past its 64 positions, and
// MQA with biases, linear RoPE, tied).
INSTANTIATE_TEST_SUITE_P(PublishedLayouts, HfLogits,
                         ::testing::Values("exaone3", "exaone35-tied", "internlm2",
                                           "internlm2-bias"),
                         [](const auto &info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

} // namespace
} // namespace llmc
