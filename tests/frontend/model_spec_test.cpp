// loadModelSpec on model.json files, config.json files and model directories
// that the tests write into scratch folders.
#include "common/test_paths.h"
#include "frontend/model_spec.h"
#include "frontend_test_util.h"

#include <filesystem>

namespace llmc {
namespace {

namespace fs = std::filesystem;
using test::expectNames;
using test::writeText;

class ModelSpecTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::canonical(
               test::scratchDir(::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `relative` (creating folders) and returns its absolute path.
  std::string file(const std::string &relative, const std::string &text = "{}") {
    fs::path path = fs::path(dir_) / relative;
    fs::create_directories(path.parent_path());
    writeText(path.string(), text);
    return path.string();
  }
  std::string weights(const std::string &relative) {
    std::string path = file(relative);
    test::writeSafetensors(path, {{"model.norm.weight", {8}}});
    return path;
  }
  // A complete HF directory `relative` holding the tiny config.
  std::string hfDir(const std::string &relative) {
    file(relative + "/config.json", test::tinyConfig().dump());
    file(relative + "/tokenizer.json");
    weights(relative + "/model.safetensors");
    return dir_ + "/" + relative;
  }
  Expected<ModelSpec> loadModelJson(const Json &json) {
    return loadModelSpec(file("model.json", json.dump()));
  }
  std::string loadError(const Json &json) {
    auto spec = loadModelJson(json);
    EXPECT_FALSE(spec.isOk());
    return spec.isOk() ? "" : spec.message();
  }
  // A valid model.json with the config inline, one weight file and a tokenizer.
  Json inlineModelJson() {
    weights("model.safetensors");
    file("tokenizer.json");
    return {{"config", test::tinyConfig()},
            {"weights", "model.safetensors"},
            {"tokenizer", "tokenizer.json"}};
  }

  std::string dir_;
};

TEST_F(ModelSpecTest, ModelJsonWithInlineConfig) {
  auto spec = loadModelJson(inlineModelJson());
  ASSERT_TRUE(spec.isOk()) << spec.message();
  EXPECT_EQ(spec->config.hiddenSize, 8);
  EXPECT_EQ(spec->configSource, dir_ + "/model.json");
  EXPECT_EQ(spec->weightFiles, std::vector<std::string>{dir_ + "/model.safetensors"});
  EXPECT_EQ(spec->weightIndex, "");
  EXPECT_EQ(spec->tokenizerPath, dir_ + "/tokenizer.json");
  EXPECT_EQ(spec->dtype, "f32");  // torch_dtype float32
  EXPECT_EQ(spec->maxSeqLen, 32); // max_position_embeddings
}

TEST_F(ModelSpecTest, ModelJsonWithConfigPathDtypeAndContext) {
  Json json = inlineModelJson();
  Json config = test::tinyConfig();
  config["torch_dtype"] = "bfloat16";
  json["config"] = "hf/config.json";
  std::string configPath = file("hf/config.json", config.dump());
  auto spec = loadModelJson(json);
  ASSERT_TRUE(spec.isOk()) << spec.message();
  EXPECT_EQ(spec->configSource, configPath);
  EXPECT_EQ(spec->dtype, "bf16");
  json["dtype"] = "f16";
  json["max_seq_len"] = 16;
  spec = loadModelJson(json);
  ASSERT_TRUE(spec.isOk()) << spec.message();
  EXPECT_EQ(spec->dtype, "f16");
  EXPECT_EQ(spec->maxSeqLen, 16);
}

TEST_F(ModelSpecTest, ModelJsonWithWeightListKeepsOrder) {
  Json json = inlineModelJson();
  weights("b.safetensors");
  weights("a.safetensors");
  json["weights"] = {"b.safetensors", "a.safetensors"};
  auto spec = loadModelJson(json);
  ASSERT_TRUE(spec.isOk()) << spec.message();
  EXPECT_EQ(spec->weightFiles,
            (std::vector<std::string>{dir_ + "/b.safetensors", dir_ + "/a.safetensors"}));
}

TEST_F(ModelSpecTest, ModelJsonWithIndexListsItsShards) {
  Json json = inlineModelJson();
  weights("shards/model-00002-of-00002.safetensors");
  weights("shards/model-00001-of-00002.safetensors");
  Json index = {{"metadata", {{"total_size", 64}}},
                {"weight_map",
                 {{"model.norm.weight", "model-00002-of-00002.safetensors"},
                  {"model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
                  {"lm_head.weight", "model-00002-of-00002.safetensors"}}}};
  std::string indexPath = file("shards/model.safetensors.index.json", index.dump());
  json["weights"] = "shards/model.safetensors.index.json";
  auto spec = loadModelJson(json);
  ASSERT_TRUE(spec.isOk()) << spec.message();
  EXPECT_EQ(spec->weightIndex, indexPath);
  EXPECT_EQ(spec->weightFiles,
            (std::vector<std::string>{dir_ + "/shards/model-00001-of-00002.safetensors",
                                      dir_ + "/shards/model-00002-of-00002.safetensors"}));
}

TEST_F(ModelSpecTest, IndexNamingMissingShard) {
  Json json = inlineModelJson();
  Json index = {{"weight_map", {{"model.norm.weight", "gone.safetensors"}}}};
  file("model.safetensors.index.json", index.dump());
  json["weights"] = "model.safetensors.index.json";
  std::string message = loadError(json);
  expectNames(message, "model.safetensors.index.json", "model.norm.weight");
  expectNames(message, dir_ + "/gone.safetensors", "not found");
}

TEST_F(ModelSpecTest, IndexMayNotLeaveItsFolder) {
  Json json = inlineModelJson();
  weights("elsewhere.safetensors");
  Json index = {{"weight_map", {{"model.norm.weight", "../elsewhere.safetensors"}}}};
  file("sub/model.safetensors.index.json", index.dump());
  json["weights"] = "sub/model.safetensors.index.json";
  expectNames(loadError(json), "model.safetensors.index.json", "../elsewhere.safetensors");
}

TEST_F(ModelSpecTest, RelativePathsResolveAgainstModelJsonFolder) {
  weights("w/model.safetensors");
  file("t/tokenizer.json");
  std::string absoluteConfig = file("c/config.json", test::tinyConfig().dump());
  Json json = {{"config", absoluteConfig},
               {"weights", "../w/model.safetensors"},
               {"tokenizer", "./../t/tokenizer.json"}};
  std::string modelJson = file("spec/model.json", json.dump());
  // Loaded from another working directory, through a relative path.
  fs::path cwd = fs::current_path();
  fs::current_path(dir_ + "/c");
  auto spec = loadModelSpec("../spec/model.json");
  fs::current_path(cwd);
  ASSERT_TRUE(spec.isOk()) << spec.message();
  EXPECT_EQ(spec->source, "../spec/model.json");
  EXPECT_EQ(spec->configSource, absoluteConfig);
  EXPECT_EQ(spec->weightFiles, std::vector<std::string>{dir_ + "/w/model.safetensors"});
  EXPECT_EQ(spec->tokenizerPath, dir_ + "/t/tokenizer.json");
}

TEST_F(ModelSpecTest, UnknownKeyIsNamedWithSuggestion) {
  Json json = inlineModelJson();
  json["tokeniser"] = "tokenizer.json";
  std::string message = loadError(json);
  expectNames(message, "model.json", "unknown field 'tokeniser'");
  EXPECT_NE(message.find("did you mean 'tokenizer'?"), std::string::npos) << message;
}

TEST_F(ModelSpecTest, MissingTokenizerFileNamesFieldAndResolvedPath) {
  Json json = inlineModelJson();
  json["tokenizer"] = "tok/tokenizer.json";
  std::string message = loadError(json);
  expectNames(message, "model.json", "'tokenizer'");
  EXPECT_NE(message.find("file not found: " + dir_ + "/tok/tokenizer.json"), std::string::npos)
      << message;
}

TEST_F(ModelSpecTest, MissingWeightInListNamesItsIndex) {
  Json json = inlineModelJson();
  json["weights"] = {"model.safetensors", "missing.safetensors"};
  std::string message = loadError(json);
  expectNames(message, "model.json", "'weights[1]'");
  EXPECT_NE(message.find(dir_ + "/missing.safetensors"), std::string::npos) << message;
}

TEST_F(ModelSpecTest, RequiredFieldsAndTheirTypes) {
  Json json = inlineModelJson();
  json.erase("weights");
  expectNames(loadError(json), "model.json", "'weights'");
  json = inlineModelJson();
  json.erase("tokenizer");
  expectNames(loadError(json), "model.json", "'tokenizer'");
  json = inlineModelJson();
  json.erase("config");
  expectNames(loadError(json), "model.json", "'config'");
  json = inlineModelJson();
  json["config"] = 7;
  expectNames(loadError(json), "model.json", "'config'");
  json = inlineModelJson();
  json["weights"] = Json::array();
  expectNames(loadError(json), "model.json", "'weights'");
}

TEST_F(ModelSpecTest, NonSafetensorsWeightsAreRejected) {
  Json json = inlineModelJson();
  file("pytorch_model.bin");
  json["weights"] = "pytorch_model.bin";
  expectNames(loadError(json), "model.json", "'weights'");
}

TEST_F(ModelSpecTest, InlineConfigErrorsNameModelJsonAndField) {
  Json json = inlineModelJson();
  json["config"].erase("vocab_size");
  std::string message = loadError(json);
  expectNames(message, "model.json: config", "'vocab_size'");
}

TEST_F(ModelSpecTest, ConfigFileErrorsNameThatFile) {
  Json json = inlineModelJson();
  Json config = test::tinyConfig();
  config["num_key_value_heads"] = 3;
  file("config.json", config.dump());
  json["config"] = "config.json";
  expectNames(loadError(json), dir_ + "/config.json", "'num_key_value_heads'");
}

TEST_F(ModelSpecTest, BadDtypeAndContextLength) {
  Json json = inlineModelJson();
  json["dtype"] = "fp16";
  std::string message = loadError(json);
  expectNames(message, "model.json", "'dtype'");
  EXPECT_NE(message.find("supported: f32, f16, bf16"), std::string::npos) << message;
  json = inlineModelJson();
  json["max_seq_len"] = 33;
  expectNames(loadError(json), "model.json", "'max_seq_len'");
  json["max_seq_len"] = 0;
  expectNames(loadError(json), "model.json", "'max_seq_len'");
}

TEST_F(ModelSpecTest, ModelJsonThatIsNotJson) {
  std::string path = file("model.json", "{\"config\": ");
  auto spec = loadModelSpec(path);
  ASSERT_FALSE(spec.isOk());
  expectNames(spec.message(), path, "invalid JSON");
}

TEST_F(ModelSpecTest, ConfigJsonThatIsNotJson) {
  std::string path = file("hf/config.json", "not json");
  auto spec = loadModelSpec(dir_ + "/hf");
  ASSERT_FALSE(spec.isOk());
  expectNames(spec.message(), path, "invalid JSON");
}

TEST_F(ModelSpecTest, HfDirectory) {
  std::string dir = hfDir("tiny");
  auto spec = loadModelSpec(dir);
  ASSERT_TRUE(spec.isOk()) << spec.message();
  EXPECT_EQ(spec->source, dir);
  EXPECT_EQ(spec->configSource, dir + "/config.json");
  EXPECT_EQ(spec->weightFiles, std::vector<std::string>{dir + "/model.safetensors"});
  EXPECT_EQ(spec->tokenizerPath, dir + "/tokenizer.json");
  EXPECT_EQ(spec->config.numLayers, 2);
  EXPECT_EQ(spec->maxSeqLen, 32);
}

TEST_F(ModelSpecTest, HfConfigJsonPathUsesItsFolder) {
  std::string dir = hfDir("tiny");
  auto spec = loadModelSpec(dir + "/config.json");
  ASSERT_TRUE(spec.isOk()) << spec.message();
  EXPECT_EQ(spec->configSource, dir + "/config.json");
  EXPECT_EQ(spec->weightFiles, std::vector<std::string>{dir + "/model.safetensors"});
}

TEST_F(ModelSpecTest, HfDirectoryWithIndex) {
  file("hf/config.json", test::tinyConfig().dump());
  file("hf/tokenizer.json");
  weights("hf/model-00001-of-00001.safetensors");
  Json index = {{"weight_map", {{"model.norm.weight", "model-00001-of-00001.safetensors"}}}};
  file("hf/model.safetensors.index.json", index.dump());
  auto spec = loadModelSpec(dir_ + "/hf");
  ASSERT_TRUE(spec.isOk()) << spec.message();
  EXPECT_EQ(spec->weightIndex, dir_ + "/hf/model.safetensors.index.json");
  EXPECT_EQ(spec->weightFiles,
            std::vector<std::string>{dir_ + "/hf/model-00001-of-00001.safetensors"});
}

TEST_F(ModelSpecTest, HfDirectoryWithLooseShardsSorted) {
  file("hf/config.json", test::tinyConfig().dump());
  file("hf/tokenizer.json");
  weights("hf/b.safetensors");
  weights("hf/a.safetensors");
  auto spec = loadModelSpec(dir_ + "/hf");
  ASSERT_TRUE(spec.isOk()) << spec.message();
  EXPECT_EQ(spec->weightFiles,
            (std::vector<std::string>{dir_ + "/hf/a.safetensors", dir_ + "/hf/b.safetensors"}));
}

TEST_F(ModelSpecTest, HfDirectoryMissingPieces) {
  file("hf/config.json", test::tinyConfig().dump());
  auto spec = loadModelSpec(dir_ + "/hf");
  ASSERT_FALSE(spec.isOk());
  expectNames(spec.message(), dir_ + "/hf", "no weights found");
  weights("hf/model.safetensors");
  spec = loadModelSpec(dir_ + "/hf");
  ASSERT_FALSE(spec.isOk());
  expectNames(spec.message(), dir_ + "/hf/tokenizer.json", "tokenizer not found");
  fs::create_directories(dir_ + "/empty");
  spec = loadModelSpec(dir_ + "/empty");
  ASSERT_FALSE(spec.isOk());
  expectNames(spec.message(), dir_ + "/empty", "config.json not found");
}

TEST_F(ModelSpecTest, MissingPath) {
  auto spec = loadModelSpec(dir_ + "/nothing.json");
  ASSERT_FALSE(spec.isOk());
  expectNames(spec.message(), dir_ + "/nothing.json", "no such file or directory");
}

} // namespace
} // namespace llmc
