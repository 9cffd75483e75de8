// llmrun bench engine.plan: prefill and decode throughput (median of
// repeats, after one untimed warm-up run) and, for decode, the weight-read bandwidth it achieves next to
// this machine's measured memory bandwidth. Prompts are fixed pseudo-random
// token ids, so runs are comparable; generation ignores EOS.
#include "cli_common.h"
#include "cpu/matmul_q4.h"
#include "cpu/read_bandwidth.h"
#include "engine/generate.h"
#include "llmrun_commands.h"
#include "llmrun_engine.h"
#include "ops/operands.h"
#include "support/thread_pool.h"

#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace llmc {
namespace {

constexpr int64_t kMaxTokens = int64_t{1} << 24; // the loader's ceiling of max_seq_len
constexpr int64_t kMaxBatch = 65536;
constexpr int64_t kMaxRepeats = 1000;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Bytes of weights a decode step reads once for the whole batch: every
// tensor a step uses, except the embedding table (a gather of a few rows);
// int4 zero points as the CPU backend holds them (4 bits each), and each
// tensor as the backend streams it (Backend::streamedWeightBytes).
uint64_t weightBytesPerDecodeStep(const Plan &plan, const Backend &backend) {
  const fb::Program *program = plan.program(fb::Target::Cpu, fb::Phase::Decode);
  std::vector<bool> counted(plan.meta().tensors()->size(), false);
  uint64_t bytes = 0;
  for (const fb::Step *step : *program->steps()) {
    if (step->op() == fb::OpKind::Embedding || step->weights() == nullptr)
      continue;
    const int zeros = ops::q4ZerosOperand(*step);
    for (uint32_t i = 0; i < step->weights()->size(); ++i) {
      const int w = step->weights()->Get(i);
      if (counted[w])
        continue;
      counted[w] = true;
      const fb::Tensor &t = *plan.meta().tensors()->Get(w);
      bytes += static_cast<int>(i) == zeros
                   ? t.shape()->Get(0) * cpu::q4ZeroRowBytes(t.shape()->Get(1))
                   : backend.streamedWeightBytes(static_cast<uint32_t>(w), t.size());
    }
  }
  return bytes;
}

// Peak resident set size of this process so far, in bytes.
uint64_t peakRssBytes() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;
}

} // namespace

void registerBenchCommand(CLI::App &app, int &exitCode) {
  struct Options {
    std::string plan;
    int64_t promptLen = 128, genLen = 64, batch = 1, repeats = 3;
    bool json = false, noBandwidth = false, noWarmup = false, pairedBandwidth = false;
    EngineFlags engine;
  };
  auto o = std::make_shared<Options>();
  CLI::App *cmd = app.add_subcommand("bench", "Prefill and decode throughput");
  cmd->add_option("plan", o->plan, "Engine plan")->required();
  // Ranges: a sequence is at most the loader's max_seq_len ceiling (2^24);
  // the plan's own max_seq_len and the KV cache's memory are checked at load.
  cmd->add_option("--prompt-len", o->promptLen, "Prompt tokens per sequence (128)")
      ->check(CLI::Range(int64_t{1}, kMaxTokens));
  cmd->add_option("--gen-len", o->genLen, "Generated tokens per sequence (64)")
      ->check(CLI::Range(int64_t{1}, kMaxTokens));
  cmd->add_option("--batch", o->batch, "Sequences decoded together (1)")
      ->check(CLI::Range(int64_t{1}, kMaxBatch));
  cmd->add_option("--repeats", o->repeats, "Runs; the median is reported (3)")
      ->check(CLI::Range(int64_t{1}, kMaxRepeats));
  cmd->add_flag("--no-warmup", o->noWarmup,
                "Time the first run too (default: one untimed run first, as llama-bench)");
  CLI::Option *noBandwidth =
      cmd->add_flag("--no-bandwidth", o->noBandwidth, "Skip measuring the memory bandwidth");
  cmd->add_flag("--paired-bandwidth", o->pairedBandwidth,
                "CPU: probe the memory bandwidth right before and after every timed run "
                "and report each run's decode against the probes around it (median), for "
                "hosts whose bandwidth drifts; keeps the probe's 1 GiB through the runs")
      ->excludes(noBandwidth);
  cmd->add_flag("--json", o->json, "Print JSON");
  o->engine.add(*cmd);
  cmd->callback([o, &exitCode]() {
    exitCode = 1;
    auto loaded = loadEngine(o->plan, o->engine, o->batch, o->json);
    if (!loaded) {
      exitCode = cli::fail(loaded.status());
      return;
    }
    Engine &engine = **loaded;
    if (o->promptLen + o->genLen > engine.model().max_seq_len()) { // both <= 2^24: no overflow
      exitCode = cli::fail(
          "--prompt-len + --gen-len = " + std::to_string(o->promptLen + o->genLen) +
          " exceeds the plan's max_seq_len " + std::to_string(engine.model().max_seq_len()));
      return;
    }
    std::vector<std::vector<int32_t>> prompts(o->batch);
    uint64_t state = 12345;
    for (auto &prompt : prompts)
      for (int64_t i = 0; i < o->promptLen; ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        prompt.push_back(static_cast<int32_t>((state >> 33) % engine.vocabSize()));
      }
    GenerateOptions options;
    options.maxNewTokens = o->genLen;
    options.ignoreEos = true;
    options.sampling.temperature = 0.0f;
    // The warm-up (llama-bench's): the prompts and one generated token,
    // untimed, so that the first timed run does not fault the mapped weights
    // in (from disk when the page cache dropped them) or grow the buffers.
    if (!o->noWarmup) {
      GenerateOptions warmup = options;
      warmup.maxNewTokens = 1;
      if (auto results = generateBatch(engine, prompts, warmup, nullptr); !results) {
        exitCode = cli::fail(results.status());
        return;
      }
    }
    const uint64_t weightBytes = weightBytesPerDecodeStep(engine.plan(), engine.backend());
    // GB/s of weights a decode of `tokensPerSecond` reads (a step serves the batch).
    auto weightGBs = [&](double tokensPerSecond) {
      return weightBytes * (tokensPerSecond / static_cast<double>(o->batch)) / 1e9;
    };
    // Memory before any bandwidth probe (each allocates 1 GiB of its own).
    const uint64_t peakBeforeProbe = peakRssBytes();
    ThreadPool pool(o->engine.threads);
    // --paired-bandwidth: the probe right before the first timed run and
    // after each, its buffer kept resident through the runs.
    std::optional<cpu::ReadBandwidthProbe> probe;
    std::vector<double> probes;
    auto probeNow = [&]() -> bool {
      Expected<double> gbs = probe->measure(pool);
      if (!gbs)
        exitCode = cli::fail(gbs.status());
      else
        probes.push_back(*gbs);
      return gbs.isOk();
    };
    if (o->pairedBandwidth) {
      // A GPU backend reports its device's bandwidth (measuring it); the CPU 0.
      auto deviceGBs = engine.backend().memoryBandwidthGBs();
      if (!deviceGBs) {
        exitCode = cli::fail(deviceGBs.status());
        return;
      }
      if (*deviceGBs > 0.0) {
        exitCode = cli::fail("--paired-bandwidth probes the host's memory, and this engine runs "
                             "on the GPU: drop the flag, or add --device cpu");
        return;
      }
      auto created = cpu::ReadBandwidthProbe::create(pool);
      if (!created) {
        exitCode = cli::fail(created.status());
        return;
      }
      probe.emplace(std::move(*created));
      if (!probeNow())
        return;
    }
    std::vector<double> prefill, decode;
    for (int64_t r = 0; r < o->repeats; ++r) {
      GenerateTimings t;
      auto results = generateBatch(engine, prompts, options, &t);
      if (!results) {
        exitCode = cli::fail(results.status());
        return;
      }
      prefill.push_back(t.prefillTokens / std::max(t.prefillSeconds, 1e-9));
      decode.push_back(t.decodeTokens / std::max(t.decodeSeconds, 1e-9));
      if (probe && !probeNow())
        return;
    }
    double prefillTps = median(prefill), decodeTps = median(decode);
    double achievedGBs = weightGBs(decodeTps);
    // Run r against the better of the probes around it: the bandwidth the
    // host gave at that time.
    std::vector<double> pairedFractions;
    for (size_t r = 0; probe && r < decode.size(); ++r)
      pairedFractions.push_back(weightGBs(decode[r]) / std::max(probes[r], probes[r + 1]));
    // The engine's peak: a paired probe's pages, resident from before the
    // first timed run to the end, are not the engine's.
    const uint64_t peakRss =
        probe ? std::max(peakBeforeProbe, peakRssBytes() - probe->allocatedBytes())
              : peakRssBytes();
    uint64_t kvBytes = engine.backend().kvCacheBytes();
    uint64_t planBytes = engine.plan().fileSize() - engine.backend().releasedPlanBytes() +
                         engine.backend().generatedWeightBytes();
    // On a GPU, the ceiling is the device's memory, not the host's.
    auto deviceGBs = o->noBandwidth ? Expected<double>(0.0) : engine.backend().memoryBandwidthGBs();
    if (!deviceGBs) {
      exitCode = cli::fail(deviceGBs.status());
      return;
    }
    // On the CPU: cpu/read_bandwidth.h, the engine's threads reading 1 GiB in
    // 4 prefetched vector streams each, best of 5 (paired: the best probe).
    auto hostGBs = o->noBandwidth || *deviceGBs > 0.0 ? Expected<double>(0.0)
                   : probe ? Expected<double>(*std::max_element(probes.begin(), probes.end()))
                           : cpu::measureReadBandwidth(pool);
    if (!hostGBs) {
      exitCode = cli::fail(hostGBs.status());
      return;
    }
    double machineGBs = *deviceGBs > 0.0 ? *deviceGBs : *hostGBs;
    if (o->json) {
      nlohmann::json j{{"prompt_len", o->promptLen}, {"gen_len", o->genLen},
                       {"batch", o->batch}, {"repeats", o->repeats},
                       {"warmup_runs", o->noWarmup ? 0 : 1},
                       {"threads", engine.threads()},
                       {"prefill_tokens_per_second", prefillTps},
                       {"decode_tokens_per_second", decodeTps},
                       {"weight_bytes_per_decode_step", weightBytes},
                       {"decode_weight_read_gb_per_second", achievedGBs},
                       {"machine_read_gb_per_second", machineGBs},
                       {"fraction_of_bandwidth", machineGBs > 0 ? achievedGBs / machineGBs : 0.0},
                       {"peak_rss_bytes", peakRss},
                       {"plan_and_generated_weight_bytes", planBytes},
                       {"kv_cache_bytes", kvBytes}};
      if (probe) {
        j["paired_read_gb_per_second"] = probes;
        j["paired_fractions_of_bandwidth"] = pairedFractions;
        j["paired_fraction_of_bandwidth"] = median(pairedFractions);
      }
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("batch %lld, prompt %lld, gen %lld, %d threads, median of %lld%s\n",
                  static_cast<long long>(o->batch), static_cast<long long>(o->promptLen),
                  static_cast<long long>(o->genLen), engine.threads(),
                  static_cast<long long>(o->repeats), o->noWarmup ? "" : " after a warm-up run");
      std::printf("prefill  %10.1f tok/s\n", prefillTps);
      std::printf("decode   %10.1f tok/s  (%.2f GB/s of weights read", decodeTps, achievedGBs);
      if (machineGBs > 0)
        std::printf("; machine %.2f GB/s, %.0f%%", machineGBs, 100.0 * achievedGBs / machineGBs);
      std::printf(")\n");
      if (probe) {
        std::printf("paired   median %.0f%% of the probe around each run (probes",
                    100.0 * median(pairedFractions));
        for (double gbs : probes)
          std::printf(" %.2f", gbs);
        std::printf(" GB/s)\n");
      }
      std::printf("memory   peak RSS %.1f MiB (plan + generated weights %.1f MiB, KV cache %.1f "
                  "MiB, rest: activations, tokenizer, code)\n",
                  peakRss / 1048576.0, planBytes / 1048576.0, kvBytes / 1048576.0);
    }
    exitCode = cli::flushStdout();
  });
}

} // namespace llmc
