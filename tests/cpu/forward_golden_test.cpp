// The CPU kernels composed into a plain Llama forward pass over stories260K
// must reproduce llama2.c's logits (../shared/golden): checks the kernels'
// conventions (RoPE rotate-half, GQA mapping, RMSNorm, SwiGLU, paged
// attention across prefill and decode) end to end, independently of the
// engine that will schedule them.
#include "common/test_paths.h"
#include "cpu/attention.h"
#include "cpu/kernels.h"
#include "cpu/matmul.h"
#include "kv/block_pool.h"
#include "support/json.h"
#include "support/mapped_file.h"
#include "test_util.h"

#include <cmath>
#include <cstring>
#include <map>

namespace llmc::cpu {
namespace {

constexpr int64_t kHidden = 64, kInter = 172, kLayers = 5, kHeads = 8, kKvHeads = 4, kHeadDim = 8,
                  kVocab = 512, kPositions = 256;

// F32 tensors of a safetensors file, by name, used in place.
class Weights {
public:
  void load(const std::string &path) {
    auto file = MappedFile::open(path);
    ASSERT_TRUE(file.isOk()) << file.message();
    file_ = std::move(*file);
    uint64_t headerSize;
    std::memcpy(&headerSize, file_.data(), 8);
    auto header = parseJson(
        std::string_view(reinterpret_cast<const char *>(file_.data()) + 8, headerSize), path);
    ASSERT_TRUE(header.isOk()) << header.message();
    const uint8_t *base = file_.data() + 8 + headerSize;
    for (auto it = header->begin(); it != header->end(); ++it) {
      if (it.key() == "__metadata__")
        continue;
      ASSERT_EQ((*it)["dtype"], "F32") << it.key();
      const auto &shape = (*it)["shape"];
      int64_t rows = shape[0], cols = shape.size() > 1 ? shape[1].get<int64_t>() : 1;
      tensors_[it.key()] = {base + (*it)["data_offsets"][0].get<size_t>(), DType::F32, rows, cols};
    }
  }

  WeightMatrix matrix(const std::string &name) const { return tensors_.at(name); }
  WeightVector vector(const std::string &name) const {
    const WeightMatrix &m = tensors_.at(name);
    return {m.data, m.dtype, m.rows};
  }

private:
  MappedFile file_;
  std::map<std::string, WeightMatrix> tensors_;
};

// Runs batch steps over several sequences sharing one paged KV cache.
class Forward {
public:
  Forward(const Weights &w, int32_t numBlocks, int blockSize)
      : w_(w),
        cache_(kv::KvCache::create({static_cast<int32_t>(kLayers), numBlocks, blockSize,
                                    static_cast<int32_t>(kKvHeads), static_cast<int32_t>(kHeadDim)})
                   .value()),
        invFreq_(kHeadDim / 2) {
    ropeInvFreqs(kHeadDim, 10000.0f, hd::RopeScaling{}, invFreq_.data());
    ropeTable_ = ropeTable(kPositions, kHeadDim, invFreq_.data());
    kv::KvLayerView l0 = cache_.layer(0);
    std::fill(l0.keys, l0.keys + cache_.bytes() / sizeof(float), NAN); // every layer
  }

  size_t addSequence() {
    tables_.emplace_back(cache_.shape().blockSize);
    return tables_.size() - 1;
  }

  // One step: sequence steps[i].first feeds tokens steps[i].second starting
  // at startPositions[i]. Returns logits [rows, vocab].
  std::vector<float> step(const std::vector<std::pair<size_t, std::vector<int32_t>>> &steps,
                          const std::vector<int32_t> &startPositions) {
    std::vector<int32_t> ids, positions;
    std::vector<AttentionSequence> seqs;
    for (size_t i = 0; i < steps.size(); ++i) {
      kv::BlockTable &table = tables_[steps[i].first];
      const int64_t count = static_cast<int64_t>(steps[i].second.size());
      EXPECT_TRUE(table.reserve(cache_.pool(), startPositions[i] + count).isOk());
      seqs.push_back({static_cast<int64_t>(ids.size()), count, table.blocks().data()});
      for (int64_t t = 0; t < count; ++t) {
        ids.push_back(steps[i].second[t]);
        positions.push_back(startPositions[i] + static_cast<int32_t>(t));
      }
    }
    const int64_t T = static_cast<int64_t>(ids.size());
    std::vector<float> h(T * kHidden), x(T * kHidden), q(T * kHidden), k(T * kKvHeads * kHeadDim),
        v(T * kKvHeads * kHeadDim), att(T * kHidden), gate(T * kInter), up(T * kInter);
    EXPECT_TRUE(embedding(pool_, w_.matrix("model.embed_tokens.weight"), ids.data(), T, h.data()));
    for (int64_t l = 0; l < kLayers; ++l) {
      std::string p = "model.layers." + std::to_string(l) + ".";
      rmsNorm(pool_, h.data(), T, w_.vector(p + "input_layernorm.weight"), 1e-5f, x.data());
      matmul(pool_, x.data(), T, w_.matrix(p + "self_attn.q_proj.weight"), nullptr, 0, q.data());
      matmul(pool_, x.data(), T, w_.matrix(p + "self_attn.k_proj.weight"), nullptr, 0, k.data());
      matmul(pool_, x.data(), T, w_.matrix(p + "self_attn.v_proj.weight"), nullptr, 0, v.data());
      rope(pool_, q.data(), T, kHidden, {kHeads, kHeadDim, kHeadDim}, positions.data(),
           ropeTable_.data());
      rope(pool_, k.data(), T, kKvHeads * kHeadDim, {kKvHeads, kHeadDim, kHeadDim},
           positions.data(), ropeTable_.data());
      AttentionBatch batch{q.data(),
                           kHidden,
                           k.data(),
                           kKvHeads * kHeadDim,
                           v.data(),
                           kKvHeads * kHeadDim,
                           att.data(),
                           kHidden,
                           positions.data(),
                           seqs.data(),
                           static_cast<int64_t>(seqs.size()),
                           kHeads,
                           1.0f / std::sqrt(static_cast<float>(kHeadDim))};
      pagedAttention(pool_, batch, cache_.layer(static_cast<int32_t>(l)));
      matmul(pool_, att.data(), T, w_.matrix(p + "self_attn.o_proj.weight"), nullptr, 1, h.data());
      rmsNorm(pool_, h.data(), T, w_.vector(p + "post_attention_layernorm.weight"), 1e-5f,
              x.data());
      matmul(pool_, x.data(), T, w_.matrix(p + "mlp.gate_proj.weight"), nullptr, 0, gate.data());
      matmul(pool_, x.data(), T, w_.matrix(p + "mlp.up_proj.weight"), nullptr, 0, up.data());
      swiglu(pool_, gate.data(), up.data(), gate.data(), T * kInter);
      matmul(pool_, gate.data(), T, w_.matrix(p + "mlp.down_proj.weight"), nullptr, 1, h.data());
    }
    rmsNorm(pool_, h.data(), T, w_.vector("model.norm.weight"), 1e-5f, x.data());
    std::vector<float> logits(T * kVocab);
    matmul(pool_, x.data(), T, w_.matrix("model.embed_tokens.weight"), nullptr, 0, logits.data());
    return logits;
  }

private:
  const Weights &w_;
  ThreadPool pool_{2};
  kv::KvCache cache_;
  std::vector<float> invFreq_;
  std::vector<float> ropeTable_; // [kPositions, kHeadDim]
  std::vector<kv::BlockTable> tables_;
};

struct Golden {
  std::vector<int32_t> inputs; // [kPositions] input token per position
  std::vector<float> logits;   // [kPositions, kVocab]
};

void loadGolden(Golden &g) {
  auto text = readTextFile(test::sharedPath("golden/stories260k_greedy.json"));
  ASSERT_TRUE(text.isOk()) << text.message();
  auto json = parseJson(*text, "stories260k_greedy.json");
  ASSERT_TRUE(json.isOk()) << json.message();
  for (const auto &step : (*json)["runs"][0]["per_step"])
    g.inputs.push_back(step["input_token"].get<int32_t>());
  ASSERT_EQ(g.inputs.size(), static_cast<size_t>(kPositions));
  auto logits =
      MappedFile::open(test::sharedPath("golden/stories260k_logits_once_upon_a_time.f32"));
  ASSERT_TRUE(logits.isOk()) << logits.message();
  ASSERT_EQ(logits->size(), kPositions * kVocab * sizeof(float));
  g.logits.resize(kPositions * kVocab);
  std::memcpy(g.logits.data(), logits->data(), logits->size());
}

void expectLogits(const float *actual, const Golden &g, int64_t position, const char *mode) {
  for (int64_t i = 0; i < kVocab; ++i)
    ASSERT_NEAR(actual[i], g.logits[position * kVocab + i], 1e-4)
        << mode << ": position " << position << " token " << i;
}

class ForwardGolden : public ::testing::Test {
protected:
  void SetUp() override {
    LLMC_REQUIRE_SHARED("models/stories260k/model.safetensors");
    LLMC_REQUIRE_SHARED("golden/stories260k_logits_once_upon_a_time.f32");
    weights_.load(test::sharedPath("models/stories260k/model.safetensors"));
    loadGolden(golden_);
  }
  Weights weights_;
  Golden golden_;
};

TEST_F(ForwardGolden, OnePrefillOfAllPositionsOnEveryIsa) {
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    Forward forward(weights_, 40, 16);
    size_t s = forward.addSequence();
    std::vector<float> logits = forward.step({{s, golden_.inputs}}, {0});
    for (int64_t p = 0; p < kPositions; ++p)
      expectLogits(logits.data() + p * kVocab, golden_, p, isaName(isa));
  }
}

TEST_F(ForwardGolden, PromptPrefillThenBatchedDecodeOfTwoSequences) {
  // Two identical sequences in one batch, with interleaved blocks (size 4) so
  // their block tables differ, plus a chunked prefill for the second.
  Forward forward(weights_, 2 * kPositions / 4 + 2, 4);
  size_t a = forward.addSequence(), b = forward.addSequence();
  const std::vector<int32_t> &in = golden_.inputs;
  std::vector<float> logits =
      forward.step({{a, {in.begin(), in.begin() + 5}}, {b, {in.begin(), in.begin() + 3}}}, {0, 0});
  for (int64_t p = 0; p < 5; ++p)
    expectLogits(logits.data() + p * kVocab, golden_, p, "prompt a");
  logits = forward.step({{b, {in.begin() + 3, in.begin() + 5}}}, {3});
  expectLogits(logits.data() + kVocab, golden_, 4, "prompt b");
  for (int32_t p = 5; p < kPositions; ++p) {
    logits = forward.step({{a, {in[p]}}, {b, {in[p]}}}, {p, p});
    expectLogits(logits.data(), golden_, p, "decode a");
    expectLogits(logits.data() + kVocab, golden_, p, "decode b");
  }
}

} // namespace
} // namespace llmc::cpu
