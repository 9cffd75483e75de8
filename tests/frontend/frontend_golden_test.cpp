// The frontend on the real stories260k checkpoints (the tied one bundled in
// assets/, the untied one from ../shared): loaded as a directory and through
// its config.json, and cross-checked against its weights.
#include "common/test_paths.h"
#include "frontend/model_spec.h"
#include "frontend/weight_check.h"

namespace llmc {
namespace {

void expectStories260k(const ModelSpec &spec, bool tied) {
  const ModelConfig &c = spec.config;
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.hiddenSize, 64);
  EXPECT_EQ(c.intermediateSize, 172);
  EXPECT_EQ(c.numLayers, 5);
  EXPECT_EQ(c.numHeads, 8);
  EXPECT_EQ(c.numKvHeads, 4);
  EXPECT_EQ(c.headDim, 8);
  EXPECT_EQ(c.vocabSize, 512);
  EXPECT_EQ(c.maxPositionEmbeddings, 512);
  EXPECT_DOUBLE_EQ(c.rmsNormEps, 1e-5);
  EXPECT_DOUBLE_EQ(c.ropeTheta, 10000.0);
  EXPECT_EQ(c.ropeScaling.kind, RopeScaling::Kind::None);
  EXPECT_EQ(c.tieWordEmbeddings, tied);
  EXPECT_FALSE(c.attentionBias);
  EXPECT_EQ(c.bosTokenIds, std::vector<int64_t>{1});
  EXPECT_EQ(c.eosTokenIds, std::vector<int64_t>{2});
  EXPECT_EQ(spec.dtype, "f32");
  EXPECT_EQ(spec.maxSeqLen, 512);
  ASSERT_EQ(spec.weightFiles.size(), 1u);
  EXPECT_NE(spec.weightFiles[0].find("model.safetensors"), std::string::npos);
  EXPECT_NE(spec.tokenizerPath.find("tokenizer.json"), std::string::npos);

  auto weights = openModelWeights(spec);
  ASSERT_TRUE(weights.isOk()) << weights.message();
  EXPECT_EQ(weights->all().size(), tied ? 47u : 48u);
  std::vector<std::string> warnings;
  Status status = checkWeights(c, *weights, &warnings, spec.configSource);
  EXPECT_TRUE(status.isOk()) << status.message();
  EXPECT_TRUE(warnings.empty()) << warnings.front();
}

TEST(FrontendGolden, Stories260kAsDirectory) {
  auto spec = loadModelSpec(test::bundledStories260k());
  ASSERT_TRUE(spec.isOk()) << spec.message();
  expectStories260k(*spec, /*tied=*/true);
}

TEST(FrontendGolden, Stories260kThroughConfigJson) {
  auto spec = loadModelSpec(test::bundledStories260k("config.json"));
  ASSERT_TRUE(spec.isOk()) << spec.message();
  expectStories260k(*spec, /*tied=*/true);
}

TEST(FrontendGolden, Stories260kUntied) {
  LLMC_REQUIRE_SHARED("models/stories260k-untied/model.safetensors");
  auto spec = loadModelSpec(test::sharedPath("models/stories260k-untied"));
  ASSERT_TRUE(spec.isOk()) << spec.message();
  expectStories260k(*spec, /*tied=*/false);
}

} // namespace
} // namespace llmc
