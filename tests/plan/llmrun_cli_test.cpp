// llmrun's plan-facing commands as a user runs them (the binary, through a
// shell): inspect checks what a load checks and never aborts on odd strings,
// size flags are range-checked with the valid range in the error, a FIFO is
// refused without blocking, and a full stdout is an error, not exit 0.
#include "common/test_paths.h"
#include "plan_fixture.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <vector>

namespace llmc {
namespace {

// Four tokens, <s> (3) the BOS of a template (perplexity needs one).
constexpr const char *kTokenizer =
    R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"c":2,"<s>":3},"merges":[]},)"
    R"("added_tokens":[{"id":3,"content":"<s>","special":true}],)"
    R"("post_processor":{"type":"TemplateProcessing",)"
    R"("single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],)"
    R"("pair":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}},)"
    R"({"Sequence":{"id":"B","type_id":1}}],)"
    R"("special_tokens":{"<s>":{"id":"<s>","ids":[3],"tokens":["<s>"]}}}})";

struct Outcome {
  int exitCode = -1;
  std::string out, err;
};

class LlmrunCli : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = test::scratchDir("llmrun-cli");
    plan_ = writeTiny("tiny.plan", [](fb::PlanT &) {});
  }

  std::string writeTiny(const std::string &name, const std::function<void(fb::PlanT &)> &edit) {
    test::TinyPlan tiny = test::makeTinyPlan();
    tiny.contents.meta.tokenizer->tokenizer_json = kTokenizer;
    edit(tiny.contents.meta);
    const std::string path = dir_ + "/" + name;
    Status written = writePlan(path, tiny.contents).status();
    EXPECT_TRUE(written.isOk()) << written.message();
    return path;
  }

  // Runs `llmrun ARGS` under a 60 s timeout; `redirect` replaces the capture
  // of stdout (e.g. "> /dev/full").
  Outcome llmrun(const std::string &args, const std::string &redirect = "") {
    const std::string out = dir_ + "/out.txt", err = dir_ + "/err.txt";
    const std::string command = "timeout 60 " + std::string(LLMC_BINARY_DIR) + "/tools/llmrun " +
                                args + " " + (redirect.empty() ? "> '" + out + "'" : redirect) +
                                " 2> '" + err + "'";
    std::filesystem::remove(out);
    int status = std::system(command.c_str());
    Outcome run;
    run.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    run.out = read(out);
    run.err = read(err);
    return run;
  }

  static std::string read(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::string dir_, plan_;
};

// --- inspect runs the checks of a load.
TEST_F(LlmrunCli, InspectDescribesAPlanThatLoads) {
  Outcome run = llmrun("inspect " + plan_);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("tokenizer   4 tokens"), std::string::npos) << run.out;
  run = llmrun("inspect --json " + plan_);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("\"vocab_size\": 4"), std::string::npos) << run.out;
}
TEST_F(LlmrunCli, InspectRefusesAPlanWhoseTokenizerGenerationRefuses) {
  const std::string plan =
      writeTiny("bad-tokenizer.plan", [](fb::PlanT &p) { p.tokenizer->tokenizer_json = "{}"; });
  Outcome run = llmrun("inspect " + plan);
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_EQ(run.err.rfind("error: " + plan + " (embedded tokenizer)", 0), 0u) << run.err;
  EXPECT_EQ(run.out, "");
}
TEST_F(LlmrunCli, InspectJsonShowsNonUtf8StringsInsteadOfAborting) {
  // A plan built from a Latin-1 folder name: "mod\xe8le" is not UTF-8.
  const std::string plan = writeTiny(
      "latin1.plan", [](fb::PlanT &p) { p.provenance->source_model = "/data/mod\xe8le"; });
  Outcome run = llmrun("inspect --json " + plan);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("\"source_model\": \"/data/mod\xEF\xBF\xBDle\""), std::string::npos)
      << run.out;
  EXPECT_NE(run.err.find("warning: " + plan + ": some strings in the plan are not valid UTF-8"),
            std::string::npos)
      << run.err;
  run = llmrun("inspect " + plan); // the text form prints the bytes as they are
  EXPECT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("from /data/mod\xe8le"), std::string::npos) << run.out;
}

// --- A full stdout fails.
TEST_F(LlmrunCli, WritingToAFullStdoutFails) {
  const std::string full = "error: cannot write the output to stdout: No space left on device\n";
  std::ofstream(dir_ + "/text.txt") << "abcabcabc";
  for (const std::string &args :
       {"inspect " + plan_, "inspect --json " + plan_, "tokenize " + plan_ + " --text abc",
        "tokenize " + plan_ + " --text abc --json", "detokenize " + plan_ + " --ids 0,1",
        "perplexity " + plan_ + " --device cpu --threads 1 --ctx 4 --file " + dir_ + "/text.txt",
        "bench " + plan_ +
            " --device cpu --threads 1 --prompt-len 2 --gen-len 2 --repeats 1 "
            "--no-bandwidth"}) {
    Outcome run = llmrun(args, "> /dev/full");
    EXPECT_EQ(run.exitCode, 1) << args;
    EXPECT_NE(run.err.find(full), std::string::npos) << args << ": " << run.err;
    EXPECT_EQ(llmrun(args).exitCode, 0) << args; // and the same command works otherwise
  }
}

// --- bench runs the work once untimed first (llama-bench's warm-up), unless told not to.
TEST_F(LlmrunCli, BenchWarmsUpUnlessToldNotTo) {
  const std::string args = "bench " + plan_ +
                           " --device cpu --threads 1 --prompt-len 2 --gen-len 2 --repeats 1 "
                           "--no-bandwidth";
  Outcome run = llmrun(args + " --json");
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("\"warmup_runs\":1"), std::string::npos) << run.out;
  run = llmrun(args + " --json --no-warmup");
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("\"warmup_runs\":0"), std::string::npos) << run.out;
  run = llmrun(args);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("median of 1 after a warm-up run"), std::string::npos) << run.out;
}

// --- bench counts an int4 matrix's zero points as the CPU backend holds them:
// 4 bits each, not the plan's f16.
TEST_F(LlmrunCli, BenchCountsInt4ZeroPointsPacked) {
  auto weightBytes = [&](const std::string &plan) -> long long {
    Outcome run = llmrun("bench " + plan +
                         " --device cpu --threads 1 --prompt-len 2 --gen-len 2 --repeats 1 "
                         "--no-bandwidth --no-warmup --json");
    EXPECT_EQ(run.exitCode, 0) << run.err;
    const std::string key = "\"weight_bytes_per_decode_step\":";
    const size_t at = run.out.find(key);
    EXPECT_NE(at, std::string::npos) << run.out;
    return at == std::string::npos ? -1 : std::stoll(run.out.substr(at + key.size()));
  };
  auto q4 = test::makeQ4Plan();
  q4->tiny.contents.meta.tokenizer->tokenizer_json = kTokenizer;
  const std::string q4Path = dir_ + "/q4.plan";
  ASSERT_TRUE(writePlan(q4Path, q4->tiny.contents).isOk());
  // The [8, 8] f32 projection (256 bytes) becomes 8 rows of 4 words, an f16
  // scale and a packed zero byte per row.
  const long long rows = test::kHidden;
  EXPECT_EQ(weightBytes(q4Path),
            weightBytes(plan_) - rows * rows * 4 + rows * 4 * 4 + rows * 2 + rows * 1);
}

// --- Size flags say their valid range.
TEST_F(LlmrunCli, BenchRangeChecksItsSizeFlags) {
  Outcome run = llmrun("bench " + plan_ + " --prompt-len 9223372036854775807");
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_NE(run.err.find("--prompt-len: Value 9223372036854775807 not in range 1 to 16777216"),
            std::string::npos)
      << run.err;
  run = llmrun("bench " + plan_ + " --batch 134217729");
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_NE(run.err.find("--batch: Value 134217729 not in range 1 to 65536"), std::string::npos)
      << run.err;
  for (const char *flag : {"--gen-len 0", "--repeats 0", "--repeats 1001", "--prompt-len -1"}) {
    run = llmrun("bench " + plan_ + " " + flag);
    EXPECT_EQ(run.exitCode, 2) << flag;
    EXPECT_NE(run.err.find("not in range"), std::string::npos) << flag << ": " << run.err;
  }
  run = llmrun("bench " + plan_ + " --device cpu --prompt-len 30 --gen-len 30");
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("error: --prompt-len + --gen-len = 60 exceeds the plan's max_seq_len 32"),
            std::string::npos)
      << run.err;
}
// --- --kv-cache-dtype f16 halves the KV cache bench reports; other types are refused.
TEST_F(LlmrunCli, KvCacheDtypeF16HalvesTheCacheAndUnknownTypesAreRefused) {
  auto kvBytes = [&](const std::string &dtype) {
    Outcome run = llmrun("bench " + plan_ +
                         " --device cpu --threads 1 --prompt-len 2 --gen-len 2 "
                         "--repeats 1 --no-bandwidth --json --kv-cache-dtype " +
                         dtype);
    EXPECT_EQ(run.exitCode, 0) << dtype << ": " << run.err;
    const size_t key = run.out.find("\"kv_cache_bytes\":");
    EXPECT_NE(key, std::string::npos) << run.out;
    return key == std::string::npos ? 0.0 : std::strtod(run.out.c_str() + key + 17, nullptr);
  };
  const double f32 = kvBytes("f32"), f16 = kvBytes("f16");
  EXPECT_GT(f32, 0.0);
  EXPECT_EQ(f16 * 2, f32);
  EXPECT_EQ(kvBytes("auto"), f32);
  Outcome run = llmrun("bench " + plan_ + " --device cpu --kv-cache-dtype bf16");
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_NE(run.err.find("--kv-cache-dtype: bf16 not in {auto,f32,f16}"), std::string::npos)
      << run.err;
}

// --- bench's read-bandwidth probe (cpu/read_bandwidth.h) reports a figure.
TEST_F(LlmrunCli, BenchReportsThePositiveReadBandwidthItMeasured) {
  for (const char *threads : {"1", "2"}) {
    Outcome run = llmrun("bench " + plan_ + " --device cpu --threads " + threads +
                         " --prompt-len 2 --gen-len 2 --repeats 1 --json");
    ASSERT_EQ(run.exitCode, 0) << run.err;
    const size_t key = run.out.find("\"machine_read_gb_per_second\":");
    ASSERT_NE(key, std::string::npos) << run.out;
    const double gbs = std::strtod(run.out.c_str() + key + 29, nullptr);
    EXPECT_GT(gbs, 0.0) << threads << " threads: " << run.out;
  }
}

// --- --paired-bandwidth probes before the first timed run and after each,
// reports each run against the probes around it, and keeps the probe's 1 GiB
// out of the peak RSS; it needs the probe, so --no-bandwidth excludes it.
TEST_F(LlmrunCli, BenchPairsTheBandwidthProbeWithEachRunWhenAsked) {
  Outcome run = llmrun("bench " + plan_ +
                       " --device cpu --threads 1 --prompt-len 2 --gen-len 4 --repeats 2 --json "
                       "--paired-bandwidth");
  ASSERT_EQ(run.exitCode, 0) << run.err;
  auto numbers = [&](const std::string &key) {
    std::vector<double> values;
    const size_t at = run.out.find("\"" + key + "\":[");
    if (at == std::string::npos)
      return values;
    const char *p = run.out.c_str() + at + key.size() + 4;
    while (*p != ']') {
      char *end = nullptr;
      values.push_back(std::strtod(p, &end));
      p = *end == ',' ? end + 1 : end;
    }
    return values;
  };
  const std::vector<double> probes = numbers("paired_read_gb_per_second");
  ASSERT_EQ(probes.size(), 3u) << run.out;
  for (double gbs : probes)
    EXPECT_GT(gbs, 0.0) << run.out;
  const std::vector<double> fractions = numbers("paired_fractions_of_bandwidth");
  ASSERT_EQ(fractions.size(), 2u) << run.out;
  for (double f : fractions)
    EXPECT_GT(f, 0.0) << run.out;
  EXPECT_NE(run.out.find("\"paired_fraction_of_bandwidth\":"), std::string::npos) << run.out;
  const size_t rss = run.out.find("\"peak_rss_bytes\":");
  ASSERT_NE(rss, std::string::npos) << run.out;
  EXPECT_LT(std::strtod(run.out.c_str() + rss + 17, nullptr), 512.0 * 1024 * 1024) << run.out;
  run = llmrun("bench " + plan_ + " --device cpu --paired-bandwidth --no-bandwidth");
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_NE(run.err.find("--no-bandwidth excludes --paired-bandwidth"), std::string::npos)
      << run.err;
}

TEST_F(LlmrunCli, PerplexityRangeChecksCtx) {
  std::ofstream(dir_ + "/text.txt") << "abcabc";
  for (const char *ctx : {"0", "1", "16777217", "9223372036854775807"}) {
    Outcome run = llmrun("perplexity " + plan_ + " --file " + dir_ + "/text.txt --ctx " + ctx);
    EXPECT_EQ(run.exitCode, 2) << ctx;
    EXPECT_NE(run.err.find("--ctx: Value " + std::string(ctx) + " not in range 2 to 16777216"),
              std::string::npos)
        << run.err;
  }
}

// --- --protocol second-half scores what llama.cpp's llama-perplexity scores.
TEST_F(LlmrunCli, PerplexitySecondHalfScoresTheSecondHalfOfWholeWindows) {
  std::ofstream(dir_ + "/text.txt") << "abcabcabcabc"; // 12 ids; with BOS in front, 13
  const std::string base = "perplexity " + plan_ + " --device cpu --threads 1 --json --file " +
                           dir_ + "/text.txt --protocol second-half --ctx ";
  // ctx 4: 3 whole windows (the 13th id dropped), each scores position 3 only.
  Outcome run = llmrun(base + "4");
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("\"predicted\":3,"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\"windows\":3}"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\"protocol\":\"second-half\""), std::string::npos) << run.out;
  // ctx 5: 2 windows, positions 3 and 4 of each.
  run = llmrun(base + "5");
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("\"predicted\":4,"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\"windows\":2}"), std::string::npos) << run.out;
  // ctx 13: one window of all 13; ctx 14: not even one.
  run = llmrun(base + "13");
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("\"predicted\":6,"), std::string::npos) << run.out;
  run = llmrun(base + "14");
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("error: " + dir_ + "/text.txt: 12 ids, fewer than one window of --ctx 14"),
            std::string::npos)
      << run.err;
  // The default protocol predicts every id: 12 in windows of 3.
  run = llmrun("perplexity " + plan_ + " --device cpu --threads 1 --json --ctx 4 --file " + dir_ +
               "/text.txt");
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("\"predicted\":12,"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\"protocol\":\"llmc\""), std::string::npos) << run.out;
  run = llmrun("perplexity " + plan_ + " --file " + dir_ + "/text.txt --protocol halves");
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_NE(run.err.find("--protocol"), std::string::npos) << run.err;
}

// --- Files that are not regular files.
TEST_F(LlmrunCli, AFifoAsPlanOrTokenizerIsRefusedWithoutBlocking) {
  const std::string fifo = dir_ + "/fifo.plan";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string &args :
       {"inspect " + fifo, "tokenize " + fifo + " --text a", "bench " + fifo + " --device cpu"}) {
    Outcome run = llmrun(args); // `timeout 60` ends it if it blocks (exit 124)
    EXPECT_EQ(run.exitCode, 1) << args << ": " << run.err;
    EXPECT_NE(run.err.find(fifo + ": is a FIFO (named pipe), not a regular file"),
              std::string::npos)
        << args << ": " << run.err;
  }
}

} // namespace
} // namespace llmc
