// Tests that `llmc build` refuses, before writing anything, what would only
// fail at run time (a tokenizer larger than the vocab, a context the runtime
// refuses, NaN/Inf weights) and outputs that are its own inputs; that two
// builds of the same inputs give the same bytes; and that llmc fails when
// its stdout cannot be written. Models: copies of tests/data/hf/llama-plain.
#include "common/test_paths.h"
#include "driver/build.h"
#include "plan/plan.h"
#include "plan/plan_format.h"
#include "support/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sys/wait.h>
#include <unistd.h>

namespace llmc {
namespace {

namespace fs = std::filesystem;

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeAll(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A fresh copy of the llama-plain test model (vocab 512, 2 layers, H 64).
std::string copyModel(const std::string &name) {
  std::string dir = test::scratchDir("build-checks-" + name) + "/model";
  fs::create_directories(dir);
  for (const char *file : {"config.json", "tokenizer.json", "model.safetensors"})
    fs::copy_file(test::testDataPath(std::string("hf/llama-plain/") + file), dir + "/" + file);
  return dir;
}

void editJson(const std::string &path, const std::function<void(Json &)> &edit) {
  Json j = Json::parse(readAll(path));
  edit(j);
  writeAll(path, j.dump(2));
}

// Overwrites the first `count` values of F32 tensor `name` with `value`.
void poison(const std::string &safetensors, const std::string &name, int count, float value) {
  std::string bytes = readAll(safetensors);
  uint64_t headerSize = 0;
  std::memcpy(&headerSize, bytes.data(), 8);
  Json header = Json::parse(bytes.substr(8, headerSize));
  ASSERT_TRUE(header.contains(name)) << name;
  uint64_t offset = 8 + headerSize + header[name]["data_offsets"][0].get<uint64_t>();
  for (int i = 0; i < count; ++i)
    std::memcpy(&bytes[offset + 4 * i], &value, 4);
  writeAll(safetensors, bytes);
}

Status build(const std::string &model, const std::string &output, BuildOptions options = {},
             std::vector<std::string> *warnings = nullptr) {
  options.input = model;
  options.output = output;
  options.targets = "cpu";
  BuildReporter quiet;
  quiet.info = quiet.verbose = quiet.ir = [](const std::string &) {};
  quiet.warning = [warnings](const std::string &line) {
    if (warnings)
      warnings->push_back(line);
  };
  return runBuild(options, quiet);
}

TEST(BuildChecks, RefusesATokenizerWithMoreTokensThanTheVocab) {
  std::string model = copyModel("tokenizer");
  editJson(model + "/tokenizer.json", [](Json &t) {
    t["added_tokens"].push_back({{"id", 512},
                                 {"content", "<extra>"},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", false},
                                 {"special", true}});
  });
  Status status = build(model, model + "/../out.plan");
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("tokenizer.json: the tokenizer has 513 token ids but"),
            std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("vocab_size 512"), std::string::npos) << status.message();
  EXPECT_FALSE(fs::exists(model + "/../out.plan"));
}

TEST(BuildChecks, RefusesAContextLongerThanTheRuntimeAccepts) {
  std::string model = copyModel("context");
  editJson(model + "/config.json",
           [](Json &c) { c["max_position_embeddings"] = kMaxPlanSeqLen + 1; });
  Status status = build(model, model + "/../out.plan");
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("max_position_embeddings " + std::to_string(kMaxPlanSeqLen + 1) +
                                  " exceeds the longest sequence the runtime accepts"),
            std::string::npos)
      << status.message();
  // The fix the message names works: the plan builds and loads.
  BuildOptions shorter;
  shorter.maxSeqLen = 256;
  Status fixed = build(model, model + "/../out.plan", shorter);
  ASSERT_TRUE(fixed.isOk()) << fixed.message();
  EXPECT_TRUE(Plan::open(model + "/../out.plan").isOk());
}

TEST(BuildChecks, RefusesNanAndInfWeightsNamingTensorAndCount) {
  std::string model = copyModel("nan");
  poison(model + "/model.safetensors", "model.norm.weight", 3,
         std::numeric_limits<float>::quiet_NaN());
  poison(model + "/model.safetensors", "model.layers.1.mlp.down_proj.weight", 1,
         -std::numeric_limits<float>::infinity());
  Status status = build(model, model + "/../out.plan");
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("2 weights hold NaN or infinite values"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("tensor 'model.norm.weight' holds 3 NaN/Inf values (of 64)"),
            std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("tensor 'model.layers.1.mlp.down_proj.weight' holds 1 NaN/Inf"),
            std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("--allow-nonfinite-weights"), std::string::npos);
  EXPECT_FALSE(fs::exists(model + "/../out.plan"));

  BuildOptions allow;
  allow.allowNonFiniteWeights = true;
  std::vector<std::string> warnings;
  Status allowed = build(model, model + "/../out.plan", allow, &warnings);
  ASSERT_TRUE(allowed.isOk()) << allowed.message();
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("NaN/Inf"), std::string::npos) << warnings[0];
}

// -o onto any input, by its name, a hard link or a symlink, is refused and
// leaves every input byte as it was.
TEST(BuildChecks, RefusesAnOutputThatIsOneOfItsInputs) {
  std::string model = copyModel("inputs");
  fs::create_hard_link(model + "/config.json", model + "/../hard.plan");
  fs::create_symlink(model + "/model.safetensors", model + "/../link.plan");
  std::map<std::string, std::string> before;
  for (const char *f : {"config.json", "tokenizer.json", "model.safetensors"})
    before[f] = readAll(model + "/" + f);
  for (std::string out :
       {model + "/model.safetensors", model + "/config.json", model + "/tokenizer.json",
        model + "/../model/./config.json", model + "/../hard.plan", model + "/../link.plan"}) {
    Status status = build(model, out);
    ASSERT_FALSE(status.isOk()) << out;
    EXPECT_NE(status.message().find("is the build's input"), std::string::npos) << status.message();
  }
  Status folder = build(model, model);
  ASSERT_FALSE(folder.isOk());
  EXPECT_NE(folder.message().find("is a folder"), std::string::npos) << folder.message();
  for (const auto &[f, bytes] : before)
    EXPECT_EQ(readAll(model + "/" + f), bytes) << f;
}

// Same inputs and options, other output names and working directories:
// the same bytes, with $SOURCE_DATE_EPOCH as the creation time and no path.
TEST(BuildChecks, TwoBuildsGiveByteIdenticalPlans) {
  std::string model = copyModel("repro");
  std::string root = fs::path(model).parent_path().string();
  fs::create_directories(root + "/elsewhere");
  ::setenv("SOURCE_DATE_EPOCH", "1700000000", 1);
  fs::path cwd = fs::current_path();
  fs::current_path(root);
  Status a = build("model", "first.plan");
  fs::current_path(root + "/elsewhere");
  Status b = build(model + "/", root + "/elsewhere/second.plan");
  fs::current_path(cwd);
  ::unsetenv("SOURCE_DATE_EPOCH");
  ASSERT_TRUE(a.isOk()) << a.message();
  ASSERT_TRUE(b.isOk()) << b.message();
  std::string first = readAll(root + "/first.plan"),
              second = readAll(root + "/elsewhere/second.plan");
  ASSERT_FALSE(first.empty());
  EXPECT_TRUE(first == second) << "the two plans differ";
  EXPECT_EQ(first.find(root), std::string::npos) << "the plan holds the build's path";
  EXPECT_EQ(first.find("first.plan"), std::string::npos) << "the plan holds its output name";
  auto plan = Plan::open(root + "/first.plan");
  ASSERT_TRUE(plan.isOk()) << plan.message();
  const fb::Provenance *p = plan->meta().provenance();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->created_unix(), 1700000000);
  EXPECT_EQ(p->source_model()->str(), "model");
  EXPECT_EQ(p->options()->str(), "--target cpu -O1");
}

TEST(BuildChecks, RefusesAMalformedSourceDateEpoch) {
  std::string model = copyModel("epoch");
  ::setenv("SOURCE_DATE_EPOCH", "yesterday", 1);
  Status status = build(model, model + "/../out.plan");
  ::unsetenv("SOURCE_DATE_EPOCH");
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("SOURCE_DATE_EPOCH='yesterday'"), std::string::npos)
      << status.message();
}

// llmc's stdout paths (--emit mlir, --help, --version) fail on a full disk.
TEST(BuildChecks, LlmcFailsWhenStdoutCannotBeWritten) {
  if (!fs::exists("/dev/full"))
    GTEST_SKIP() << "no /dev/full on this machine";
  std::string model = copyModel("stdout");
  std::string llmc = std::string(LLMC_BINARY_DIR) + "/tools/llmc";
  for (std::string args :
       {"build '" + model + "' --emit mlir", std::string("--help"), std::string("--version")}) {
    int status = std::system((llmc + " " + args + " >/dev/full 2>/dev/null").c_str());
    ASSERT_TRUE(WIFEXITED(status)) << args;
    EXPECT_NE(WEXITSTATUS(status), 0) << "llmc " << args << " > /dev/full exited 0";
    int ok = std::system((llmc + " " + args + " >/dev/null 2>&1").c_str());
    EXPECT_EQ(WEXITSTATUS(ok), 0) << "llmc " << args;
  }
}

} // namespace
} // namespace llmc
