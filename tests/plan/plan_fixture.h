// A tiny valid engine plan built directly through the plan writer (no
// compiler): embedding -> rms_norm -> linear -> logits, hidden 8, vocab 16,
// with helpers that rewrite a plan's metadata or bytes for corrupt-plan tests.
#pragma once

#include "common/step_params.h"
#include "kernels/common/half.h"
#include "kernels/common/q4_layout.h"
#include "plan/plan.h"
#include "plan/plan_format.h"
#include "plan_writer.h"

#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

namespace llmc::test {

constexpr int64_t kHidden = 8, kVocab = 16, kInter = 12;

inline std::unique_ptr<fb::TensorT> tensor(const std::string &name, std::vector<int64_t> shape) {
  auto t = std::make_unique<fb::TensorT>();
  t->name = name;
  t->dtype = fb::DType::F32;
  t->shape = std::move(shape);
  return t;
}

inline std::unique_ptr<fb::BufferT> buffer(fb::DType dtype, int64_t width) {
  auto b = std::make_unique<fb::BufferT>();
  b->dtype = dtype;
  b->width = width;
  return b;
}

inline std::unique_ptr<fb::StepT> step(fb::OpKind op, std::vector<int> in, std::vector<int> out,
                                       std::vector<int> weights, fb::StepParamsUnion p) {
  auto s = std::make_unique<fb::StepT>();
  s->op = op;
  s->inputs = std::move(in);
  s->outputs = std::move(out);
  s->weights = std::move(weights);
  s->params = std::move(p);
  return s;
}

// The plan's contents; `storage` holds the weight values the sources point to.
struct TinyPlan {
  PlanContents contents;
  std::vector<std::vector<float>> storage;
};

inline TinyPlan makeTinyPlan() {
  TinyPlan tiny;
  fb::PlanT &meta = tiny.contents.meta;
  meta.model = std::make_unique<fb::ModelInfoT>();
  fb::ModelInfoT &m = *meta.model;
  m.architecture = "LlamaForCausalLM";
  m.hidden_size = kHidden;
  m.intermediate_size = kInter;
  m.num_layers = 1;
  m.num_heads = 2;
  m.num_kv_heads = 1;
  m.head_dim = 4;
  m.vocab_size = kVocab;
  m.max_seq_len = 32;
  m.rms_norm_eps = 1e-5;
  meta.tokenizer = std::make_unique<fb::TokenizerInfoT>();
  meta.tokenizer->tokenizer_json = "{}";
  meta.kv_cache = std::make_unique<fb::KvCacheInfoT>();
  meta.kv_cache->num_layers = 1;
  meta.kv_cache->num_kv_heads = 1;
  meta.kv_cache->head_dim = 4;
  meta.provenance = std::make_unique<fb::ProvenanceT>();
  meta.provenance->llmc_version = "test";
  meta.tensors.push_back(tensor("embed", {kVocab, kHidden}));
  meta.tensors.push_back(tensor("norm", {kHidden}));
  meta.tensors.push_back(tensor("proj", {kHidden, kHidden}));
  for (const auto &t : meta.tensors) {
    int64_t n = 1;
    for (int64_t d : t->shape)
      n *= d;
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i)
      values[i] = 0.01f * static_cast<float>((i * 7) % 13) - 0.05f;
    tiny.storage.push_back(std::move(values));
  }
  for (const auto &values : tiny.storage)
    tiny.contents.sources.push_back(
        {reinterpret_cast<const uint8_t *>(values.data()), DType::F32, values.size(), {}});
  auto program = std::make_unique<fb::ProgramT>();
  program->target = fb::Target::Cpu;
  program->buffers.push_back(buffer(fb::DType::I32, 1)); // 0 tokens
  program->buffers.push_back(buffer(fb::DType::F32, kHidden)); // 1
  program->buffers.push_back(buffer(fb::DType::F32, kHidden)); // 2
  program->buffers.push_back(buffer(fb::DType::F32, kHidden)); // 3
  program->buffers.push_back(buffer(fb::DType::F32, kVocab));  // 4 logits
  uint64_t offset = 0;
  for (auto &b : program->buffers) {
    b->offset_per_token = offset;
    offset += b->width * 4;
  }
  program->arena_bytes_per_token = offset;
  program->token_buffer = 0;
  program->logits_buffer = 4;
  program->steps.push_back(step(fb::OpKind::Embedding, {0}, {1}, {0}, embeddingParams()));
  program->steps.push_back(step(fb::OpKind::Norm, {1}, {2}, {1}, normParams()));
  program->steps.push_back(step(fb::OpKind::Linear, {2}, {3}, {2}, linearParams()));
  program->steps.push_back(step(fb::OpKind::Logits, {3}, {4}, {0}, logitsParams()));
  auto decode = std::make_unique<fb::ProgramT>(*program);
  decode->phase = fb::Phase::Decode;
  meta.programs.push_back(std::move(program));
  meta.programs.push_back(std::move(decode));
  return tiny;
}

// One layer as the fusion passes leave it: embedding, the q/k/v GEMM with a
// norm prologue into a packed buffer, a RoPE of q's columns, attention over
// the packed buffer, o_proj and down_proj accumulating into the residual,
// the SwiGLU GEMMs with and without a norm, and the LM head.
inline TinyPlan makeFusedPlan() {
  TinyPlan tiny = makeTinyPlan(); // model: 2 heads, 1 kv head of 4
  fb::PlanT &meta = tiny.contents.meta;
  meta.tensors.clear();
  tiny.storage.clear();
  tiny.contents.sources.clear();
  const int64_t qkv = 2 * 4 + 2 * 4;
  for (auto [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"embed", {kVocab, kHidden}},       // 0
           {"norm", {kHidden}},                // 1
           {"q+k+v", {qkv, kHidden}},          // 2
           {"o", {kHidden, kHidden}},          // 3
           {"gate+up", {2 * kInter, kHidden}}, // 4
           {"down", {kHidden, kInter}},        // 5
           {"bq+bk+bv", {qkv}}}) {             // 6
    meta.tensors.push_back(tensor(name, shape));
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    tiny.storage.emplace_back(n, 0.01f);
  }
  for (const auto &values : tiny.storage)
    tiny.contents.sources.push_back(
        {reinterpret_cast<const uint8_t *>(values.data()), DType::F32, values.size(), {}});
  auto program = std::make_unique<fb::ProgramT>();
  program->target = fb::Target::Cpu;
  for (auto [dtype, width] :
       std::vector<std::pair<fb::DType, int64_t>>{{fb::DType::I32, 1},       // 0 tokens
                                                  {fb::DType::F32, kHidden}, // 1 residual stream
                                                  {fb::DType::F32, qkv},     // 2 packed q/k/v
                                                  {fb::DType::F32, kHidden}, // 3 attention out
                                                  {fb::DType::F32, kInter},  // 4 SwiGLU out
                                                  {fb::DType::F32, kVocab},  // 5 logits
                                                  {fb::DType::I32, 1}})      // 6 greedy ids
    program->buffers.push_back(buffer(dtype, width));
  uint64_t offset = 0;
  for (auto &b : program->buffers) {
    b->offset_per_token = offset;
    offset += b->width * 4;
  }
  program->arena_bytes_per_token = offset;
  program->token_buffer = 0;
  program->logits_buffer = 5;
  using K = fb::OpKind;
  const auto silu = fb::ActivationKind::Silu;
  program->steps.push_back(step(K::Embedding, {0}, {1}, {0}, embeddingParams()));
  program->steps.push_back(
      step(K::Linear, {1}, {2}, {1, 2, 6}, linearParams({.norm = true, .bias = true})));
  program->steps.push_back(step(K::Rope, {2}, {2}, {}, ropeParams(2, 4, 0)));
  program->steps.push_back(
      step(K::Attention, {2, 2, 2}, {3}, {},
           attentionParams({.qColumn = 0, .kColumn = 8, .vColumn = 12, .rope = true})));
  program->steps.push_back(step(K::Linear, {3}, {1}, {3}, linearParams({.accumulate = true})));
  program->steps.push_back(
      step(K::Linear, {1}, {4}, {1, 4}, linearParams({.norm = true, .gate = silu})));
  program->steps.push_back(step(K::Linear, {1}, {4}, {4}, linearParams({.gate = silu})));
  program->steps.push_back(step(K::Linear, {4}, {1}, {5}, linearParams({.accumulate = true})));
  program->steps.push_back(step(K::LmHead, {1}, {5, 6}, {1, 0}, logitsParams(true)));
  auto decode = std::make_unique<fb::ProgramT>(*program);
  decode->phase = fb::Phase::Decode;
  meta.programs.clear();
  meta.programs.push_back(std::move(program));
  meta.programs.push_back(std::move(decode));
  return tiny;
}

// makeFusedPlan with every optional parameter of Gemma-style models set
// (engine.fbs): embedding scale, (1 + w) norms, a sliding window and
// soft-capping in attention, GeGLU (tanh, erf) and final-logit soft-capping.
inline TinyPlan makeGemmaFusedPlan() {
  TinyPlan tiny = makeFusedPlan();
  for (auto &program : tiny.contents.meta.programs) {
    auto &steps = program->steps;
    steps[0]->params = embeddingParams(2.0);
    steps[1]->params = linearParams({.norm = true, .bias = true, .normOffset = 1.0});
    steps[3]->params = attentionParams(
        {.qColumn = 0, .kColumn = 8, .vColumn = 12, .rope = true, .softcap = 5.0, .window = 2});
    steps[5]->params =
        linearParams({.norm = true, .gate = fb::ActivationKind::GeluTanh, .normOffset = 1.0});
    steps[6]->params = linearParams({.gate = fb::ActivationKind::GeluErf});
    steps[8]->params = logitsParams(true, 3.0, 1.0);
  }
  return tiny;
}

// One layer of the unfused op kinds, as an -O0 build leaves it: embedding,
// norm, q/k/v GEMMs, RoPE of q and k in place, attention, o_proj, residual
// add, the MLP through Silu and Mul and through SwiGlu (down_proj of the
// second accumulating), a second residual add and tied logits.
inline TinyPlan makeUnfusedPlan() {
  TinyPlan tiny = makeTinyPlan(); // model: 2 heads, 1 kv head of 4
  fb::PlanT &meta = tiny.contents.meta;
  meta.tensors.clear();
  tiny.storage.clear();
  tiny.contents.sources.clear();
  for (auto [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"embed", {kVocab, kHidden}},   // 0
           {"norm", {kHidden}},            // 1
           {"q", {kHidden, kHidden}},      // 2
           {"k", {4, kHidden}},            // 3
           {"v", {4, kHidden}},            // 4
           {"o", {kHidden, kHidden}},      // 5
           {"gate", {kInter, kHidden}},    // 6
           {"up", {kInter, kHidden}},      // 7
           {"down", {kHidden, kInter}}}) { // 8
    meta.tensors.push_back(tensor(name, shape));
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i)
      values[i] = 0.02f * static_cast<float>((i * 5) % 11) - 0.1f;
    tiny.storage.push_back(std::move(values));
  }
  for (const auto &values : tiny.storage)
    tiny.contents.sources.push_back(
        {reinterpret_cast<const uint8_t *>(values.data()), DType::F32, values.size(), {}});
  auto program = std::make_unique<fb::ProgramT>();
  program->target = fb::Target::Cpu;
  program->buffers.push_back(buffer(fb::DType::I32, 1)); // 0 tokens
  for (int64_t width : {kHidden, kHidden, kHidden, int64_t{4}, int64_t{4}, kHidden, kHidden,
                        kHidden, kInter, kInter, kInter, kInter, kInter, kHidden, kVocab})
    program->buffers.push_back(buffer(fb::DType::F32, width)); // 1 .. 15 (logits)
  uint64_t offset = 0;
  for (auto &b : program->buffers) {
    b->offset_per_token = offset;
    offset += b->width * 4;
  }
  program->arena_bytes_per_token = offset;
  program->token_buffer = 0;
  program->logits_buffer = 15;
  using K = fb::OpKind;
  auto &steps = program->steps;
  const auto add = fb::ElementwiseOp::Add;
  steps.push_back(step(K::Embedding, {0}, {1}, {0}, embeddingParams()));
  steps.push_back(step(K::Norm, {1}, {2}, {1}, normParams()));
  steps.push_back(step(K::Linear, {2}, {3}, {2}, linearParams()));
  steps.push_back(step(K::Linear, {2}, {4}, {3}, linearParams()));
  steps.push_back(step(K::Linear, {2}, {5}, {4}, linearParams()));
  steps.push_back(step(K::Rope, {3}, {3}, {}, ropeParams(2, 4)));
  steps.push_back(step(K::Rope, {4}, {4}, {}, ropeParams(1, 4)));
  steps.push_back(step(K::Attention, {3, 4, 5}, {6}, {}, attentionParams()));
  steps.push_back(step(K::Linear, {6}, {7}, {5}, linearParams()));
  steps.push_back(step(K::Elementwise, {1, 7}, {8}, {}, elementwiseParams(add)));
  steps.push_back(step(K::Linear, {8}, {9}, {6}, linearParams()));
  steps.push_back(step(K::Linear, {8}, {10}, {7}, linearParams()));
  steps.push_back(step(K::Activation, {9}, {11}, {}, activationParams(fb::ActivationKind::Silu)));
  steps.push_back(step(K::Elementwise, {11, 10}, {12}, {}, elementwiseParams(fb::ElementwiseOp::Mul)));
  steps.push_back(
      step(K::Activation, {9, 10}, {13}, {}, activationParams(fb::ActivationKind::Silu, true)));
  steps.push_back(step(K::Linear, {12}, {14}, {8}, linearParams()));
  steps.push_back(step(K::Linear, {13}, {14}, {8}, linearParams({.accumulate = true})));
  steps.push_back(step(K::Elementwise, {8, 14}, {1}, {}, elementwiseParams(add)));
  steps.push_back(step(K::Logits, {1}, {15}, {0}, logitsParams()));
  auto decode = std::make_unique<fb::ProgramT>(*program);
  decode->phase = fb::Phase::Decode;
  meta.programs.clear();
  meta.programs.push_back(std::move(program));
  meta.programs.push_back(std::move(decode));
  return tiny;
}

// makeUnfusedPlan with Llama 3.1 RoPE scaling on both Rope steps and a second
// RoPE configuration (k at another theta): the RopeScaling table in a seed.
inline TinyPlan makeScaledRopePlan() {
  TinyPlan tiny = makeUnfusedPlan();
  for (auto &program : tiny.contents.meta.programs)
    for (int s : {5, 6}) {
      fb::RopeParamsT &rope = *program->steps[s]->params.AsRopeStepParams()->rope;
      rope.scaling = std::make_unique<fb::RopeScalingT>();
      rope.scaling->kind = fb::RopeScalingKind::Llama3;
      rope.scaling->factor = 8.0;
      rope.scaling->original_max_positions = 16;
      if (s == 6)
        rope.theta = 500000.0;
    }
  return tiny;
}

// `tiny` as --synthetic-weights would build it: no stored bytes, every
// tensor generated at load from a Normal init.
inline TinyPlan makeSynthetic(TinyPlan tiny) {
  tiny.contents.meta.synthetic = true;
  tiny.contents.meta.synthetic_seed = 7;
  for (size_t i = 0; i < tiny.contents.meta.tensors.size(); ++i) {
    auto init = std::make_unique<fb::SyntheticInitT>();
    init->kind = fb::SyntheticKind::Normal;
    init->std = 0.02f;
    init->seed = 7 + i;
    tiny.contents.meta.tensors[i]->synthetic = std::move(init);
    WeightSource none; // no data: generated at load
    none.elements = tiny.contents.sources[i].elements;
    tiny.contents.sources[i] = none;
  }
  tiny.storage.clear();
  return tiny;
}

inline TinyPlan makeSyntheticTinyPlan() { return makeSynthetic(makeTinyPlan()); }

// The tiny plan with its [8, 8] projection in int4, groups of 32 (one
// ragged group of 8 columns per row); the vectors hold the int4 parts.
struct Q4Plan {
  TinyPlan tiny;
  std::vector<uint32_t> qweight;
  std::vector<uint16_t> scales, zeros;
};

inline std::unique_ptr<Q4Plan> makeQ4Plan() {
  auto p = std::make_unique<Q4Plan>();
  p->tiny = makeTinyPlan();
  fb::PlanT &meta = p->tiny.contents.meta;
  const int64_t words = hd::q4WordsPerRow(kHidden);
  p->qweight.assign(kHidden * words, 0x76543210u);
  p->scales.assign(kHidden, hd::f32ToF16(0.01f));
  p->zeros.assign(kHidden, hd::f32ToF16(8.0f));
  // Tensor 2 ("proj") becomes proj.qweight; scales and zeros are 3 and 4.
  meta.tensors[2] = tensor("proj.qweight", {kHidden, words});
  meta.tensors[2]->dtype = fb::DType::I32;
  meta.tensors.push_back(tensor("proj.scales", {kHidden, 1}));
  meta.tensors.push_back(tensor("proj.zeros", {kHidden, 1}));
  meta.tensors[3]->dtype = meta.tensors[4]->dtype = fb::DType::F16;
  auto &sources = p->tiny.contents.sources;
  sources[2] = {
      reinterpret_cast<const uint8_t *>(p->qweight.data()), DType::I32, p->qweight.size(), {}};
  sources.push_back({reinterpret_cast<const uint8_t *>(p->scales.data()), DType::F16, kHidden, {}});
  sources.push_back({reinterpret_cast<const uint8_t *>(p->zeros.data()), DType::F16, kHidden, {}});
  for (auto &program : meta.programs) {
    fb::StepT &linear = *program->steps[2];
    linear.weights = {2, 3, 4};
    linear.params = linearParams({.q4 = true, .groupSize = 32});
  }
  return p;
}

inline std::vector<uint8_t> readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

inline void writeBytes(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline PlanFileHeader headerOf(const std::vector<uint8_t> &bytes) {
  PlanFileHeader h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  return h;
}

inline void setHeader(std::vector<uint8_t> &bytes, const PlanFileHeader &h) {
  std::memcpy(bytes.data(), &h, sizeof(h));
}

// Unpacks the metadata of a valid plan file, lets `mutate` edit it, and
// writes a consistent file again (new metadata, same weight bytes, fresh
// checksums), so only the semantic checks can catch the edit.
inline void rewriteMetadata(const std::string &path, const std::function<void(fb::PlanT &)> &mutate) {
  std::vector<uint8_t> bytes = readBytes(path);
  PlanFileHeader h = headerOf(bytes);
  fb::PlanT meta;
  fb::GetPlan(bytes.data() + h.metadataOffset)->UnPackTo(&meta);
  mutate(meta);
  flatbuffers::FlatBufferBuilder builder;
  builder.Finish(fb::Plan::Pack(builder, &meta), fb::PlanIdentifier());
  std::vector<uint8_t> weights(bytes.begin() + h.weightsOffset, bytes.end());
  h.metadataSize = builder.GetSize();
  h.weightsOffset = alignUp(h.metadataOffset + h.metadataSize, 4096);
  h.metadataChecksum = fnv1a64(builder.GetBufferPointer(), builder.GetSize());
  std::vector<uint8_t> out(h.weightsOffset, 0);
  setHeader(out, h);
  std::memcpy(out.data() + h.metadataOffset, builder.GetBufferPointer(), builder.GetSize());
  out.insert(out.end(), weights.begin(), weights.end());
  writeBytes(path, out);
}

} // namespace llmc::test
