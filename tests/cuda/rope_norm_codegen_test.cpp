// The generated kernels of the new step forms, without a GPU:
// - the RoPE spec a kernel carries (ops/support.cpp ropeSpec) holds exactly
//   the CPU's frequencies: its tables are hd::ropeInvFreqAt at the pass
//   lengths they stand for (longrope: short up to the original length, long
//   past it; dynamic NTK: the plain table up to it, then the device calls
//   the CPU's hd::ropeDynamicInvFreq), with the rotary dim, pair layout and
//   attention factor of the step;
// - LayerNorm, per-head RMSNorm, partial / interleaved / scaled RoPE (as a
//   Rope step and in attention) and Logits with a scale and a bias compile
//   for sm_90a without register spills at real model widths.
#include "common/step_params.h"
#include "cuda/kernel_gen.h"
#include "cuda/nvrtc_compiler.h"
#include "kernels/common/rope.h"
#include "mini_plan.h"
#include "ops/rope.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace llmc {
namespace {

// Steps at real widths (vocab 51200, 4096 positions).
struct Mini : test::MiniPlan {
  Mini() : MiniPlan(4096) {}
};

std::unique_ptr<fb::RopeParamsT> rope(int64_t rotaryDim, bool interleaved,
                                      fb::RopeScalingKind kind) {
  auto r = test::ropeOf(rotaryDim);
  r->interleaved = interleaved;
  if (kind == fb::RopeScalingKind::None)
    return r;
  auto s = std::make_unique<fb::RopeScalingT>();
  s->kind = kind;
  s->factor = kind == fb::RopeScalingKind::Dynamic ? 2.0 : 4.0;
  s->original_max_positions = 64;
  if (kind == fb::RopeScalingKind::Yarn)
    s->attention_factor = 1.25;
  if (kind == fb::RopeScalingKind::LongRope) {
    s->attention_factor = 1.1;
    for (int64_t i = 0; i < rotaryDim / 2; ++i) {
      s->short_factor.push_back(1.0f + 0.05f * static_cast<float>(i));
      s->long_factor.push_back(2.0f + 0.5f * static_cast<float>(i));
    }
  }
  r->scaling = std::move(s);
  return r;
}

// A Rope step's kernel: `heads` heads of D, the RoPE given.
Expected<cuda::KernelInstance> ropeKernel(std::unique_ptr<fb::RopeParamsT> r, int64_t heads,
                                          int64_t D, DType act = DType::F32) {
  Mini m;
  int buf = m.buffer(act, heads * D);
  fb::StepParamsUnion params = test::ropeParams(heads, D);
  params.AsRopeStepParams()->rope = std::move(r);
  return m.kernelFor(fb::OpKind::Rope, {buf}, {buf}, {}, std::move(params), 0, false, act);
}

// The values of `__device__ const float <name>[n] = {...};` in a source.
std::vector<float> tableIn(const std::string &source, const std::string &name) {
  std::vector<float> values;
  const size_t at = source.find("__device__ const float " + name + "[");
  if (at == std::string::npos)
    return values;
  const char *p = source.c_str() + source.find('{', at) + 1;
  while (*p != '}') {
    char *end = nullptr;
    values.push_back(std::strtof(p, &end));
    p = end;
    while (*p == ',' || *p == ' ' || *p == 'f')
      ++p;
  }
  return values;
}

std::vector<float> cpuInvFreqs(const fb::RopeParamsT &r, int seqLen) {
  const ops::RopeConfig c = ops::ropeConfig(r);
  const hd::RopeScaling s = c.kernelScaling();
  std::vector<float> f;
  for (int i = 0; i < c.rotaryDim / 2; ++i)
    f.push_back(hd::ropeInvFreqAt(i, c.rotaryDim, c.theta, s, seqLen));
  return f;
}

TEST(CudaRopeSpec, PartialInterleavedTableIsTheCpusForItsRotaryDim) {
  auto r = rope(32, true, fb::RopeScalingKind::None);
  const std::vector<float> want = cpuInvFreqs(*r, 1);
  auto k = ropeKernel(std::move(r), 4, 80); // Phi-2: 80-wide heads, 32 features rotated
  ASSERT_TRUE(k.isOk()) << k.message();
  EXPECT_EQ(tableIn(k->source, "RopeSpecTable"), want);
  EXPECT_EQ(want.size(), 16u);
  EXPECT_NE(k->source.find("kRotaryDim = 32;"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("kInterleaved = true;"), std::string::npos);
  EXPECT_NE(k->source.find("kPerPass = false;"), std::string::npos);
}

TEST(CudaRopeSpec, LongRopeHasTheShortAndTheLongTable) {
  auto r = rope(64, false, fb::RopeScalingKind::LongRope);
  const std::vector<float> shortWant = cpuInvFreqs(*r, 64), longWant = cpuInvFreqs(*r, 65);
  ASSERT_NE(shortWant, longWant);
  const float factor = ops::ropeConfig(*r).scaling.attentionFactor;
  auto k = ropeKernel(std::move(r), 2, 64);
  ASSERT_TRUE(k.isOk()) << k.message();
  EXPECT_EQ(tableIn(k->source, "RopeSpecTable"), shortWant);
  EXPECT_EQ(tableIn(k->source, "RopeSpecLongTable"), longWant);
  EXPECT_NE(k->source.find("kPerPass = true;"), std::string::npos);
  char literal[64];
  std::snprintf(literal, sizeof(literal), "%af", static_cast<double>(factor));
  EXPECT_NE(k->source.find("kAttentionFactor = " + std::string(literal) + ";"), std::string::npos)
      << k->source;
  // seqLen > 64 picks the long table, as rope.h's float comparison does.
  EXPECT_NE(k->source.find("static_cast<float>(seqLen) > 0x1p+6f ? RopeSpecLongTable"),
            std::string::npos)
      << k->source;
}

TEST(CudaRopeSpec, DynamicNtkGrowsTheBaseOnTheDevicePastTheOriginalLength) {
  auto r = rope(64, false, fb::RopeScalingKind::Dynamic);
  const std::vector<float> plain = cpuInvFreqs(*r, 64);
  auto k = ropeKernel(std::move(r), 2, 64);
  ASSERT_TRUE(k.isOk()) << k.message();
  EXPECT_EQ(tableIn(k->source, "RopeSpecTable"), plain);
  EXPECT_NE(k->source.find("if (static_cast<float>(seqLen) <= 0x1p+6f) return RopeSpecTable"),
            std::string::npos)
      << k->source;
  EXPECT_NE(k->source.find("llmc::hd::ropeDynamicInvFreq(pair, kRotaryDim, 0x1.388p+13f, s, "
                           "seqLen)"),
            std::string::npos)
      << k->source;
  EXPECT_NE(k->source.find("s.factor = 0x1p+1f;"), std::string::npos);
}

TEST(CudaRopeSpec, DistinctRopeParamsGetDistinctKernels) {
  auto a = ropeKernel(rope(64, false, fb::RopeScalingKind::None), 2, 64);
  auto b = ropeKernel(rope(64, true, fb::RopeScalingKind::None), 2, 64);
  auto c = ropeKernel(rope(64, false, fb::RopeScalingKind::Yarn), 2, 64);
  ASSERT_TRUE(a.isOk() && b.isOk() && c.isOk());
  EXPECT_NE(a->name, b->name);
  EXPECT_NE(a->name, c->name);
  EXPECT_NE(b->name, c->name);
}

TEST(CudaRopeSpec, ARotaryDimPastTheHeadIsRefusedByName) {
  auto k = ropeKernel(rope(96, false, fb::RopeScalingKind::None), 2, 64);
  ASSERT_FALSE(k.isOk());
  EXPECT_NE(k.message().find("no CUDA kernel for Rope: rotary_dim 96 for heads of 64"),
            std::string::npos)
      << k.message();
}

void expectCompilesWithoutSpills(Expected<cuda::KernelInstance> k) {
  ASSERT_TRUE(k.isOk()) << k.message();
  SCOPED_TRACE(k->name);
  auto compiled = cuda::compileKernel(*k, fb::Target::Sm90a, "-");
  ASSERT_TRUE(compiled.isOk()) << compiled.message() << "\n" << k->source;
  EXPECT_FALSE(compiled->usage.spills()) << compiled->log;
}

fb::StepParamsUnion norm(fb::NormKind kind, bool bias, int64_t group) {
  fb::NormParamsT n = test::rms(1e-5);
  n.kind = kind;
  n.bias = bias;
  n.group_width = group;
  return test::params(std::move(n));
}

TEST(CudaNewFormsCodegen, RealWidthsCompileForSm90aWithoutSpills) {
  const DType bf16 = DType::BF16;
  { // Phi-2: LayerNorm with bias over 2560, bf16 weights.
    Mini m;
    int g = m.tensor(bf16, {2560}), b = m.tensor(bf16, {2560});
    int in = m.buffer(bf16, 2560), out = m.buffer(bf16, 2560);
    expectCompilesWithoutSpills(m.kernelFor(fb::OpKind::Norm, {in}, {out}, {g, b},
                                            norm(fb::NormKind::Layer, true, 0), 0, false, bf16));
  }
  { // Command R: LayerNorm over 8192; its q norm: 64 heads of 128.
    Mini m;
    int g = m.tensor(DType::F32, {8192});
    int in = m.buffer(bf16, 8192), out = m.buffer(bf16, 8192);
    expectCompilesWithoutSpills(m.kernelFor(fb::OpKind::Norm, {in}, {out}, {g},
                                            norm(fb::NormKind::Layer, false, 0), 0, false, bf16));
    expectCompilesWithoutSpills(m.kernelFor(fb::OpKind::Norm, {in}, {out}, {g},
                                            norm(fb::NormKind::Layer, false, 128), 0, false, bf16));
  }
  { // Qwen3-8B: q norm over 32 heads of 128, gamma [128].
    Mini m;
    int g = m.tensor(bf16, {128});
    int in = m.buffer(bf16, 4096), out = m.buffer(bf16, 4096);
    expectCompilesWithoutSpills(m.kernelFor(fb::OpKind::Norm, {in}, {out}, {g},
                                            norm(fb::NormKind::Rms, false, 128), 0, false, bf16));
  }
  // Rope steps: Phi-2's partial rotary, Cohere's interleaved, Phi-3's longrope.
  expectCompilesWithoutSpills(ropeKernel(rope(32, false, fb::RopeScalingKind::None), 32, 80, bf16));
  expectCompilesWithoutSpills(
      ropeKernel(rope(128, true, fb::RopeScalingKind::None), 64, 128, bf16));
  expectCompilesWithoutSpills(
      ropeKernel(rope(96, false, fb::RopeScalingKind::LongRope), 32, 96, bf16));
  // Attention with RoPE on the fly on a packed qkv (32 heads / 8 KV heads of
  // 128): partial rotary, interleaved + yarn, dynamic; decode and prefill.
  struct AttentionRope {
    int64_t rotary;
    bool interleaved;
    fb::RopeScalingKind kind;
  } ropes[] = {{64, false, fb::RopeScalingKind::None},
               {128, true, fb::RopeScalingKind::Yarn},
               {128, false, fb::RopeScalingKind::Dynamic}};
  for (const AttentionRope &ar : ropes)
    for (int64_t maxTokens : {1, 0}) {
      Mini m;
      const int64_t heads = 32, kv = 8, D = 128;
      int qkv = m.buffer(bf16, (heads + 2 * kv) * D), out = m.buffer(bf16, heads * D);
      test::AttentionShape a{.heads = heads, .kvHeads = kv, .headDim = D};
      a.kColumn = heads * D;
      a.vColumn = (heads + kv) * D;
      a.rope = true;
      fb::StepParamsUnion params = test::attentionParams(a);
      auto r = rope(ar.rotary, ar.interleaved, ar.kind);
      r->rotary_dim = ar.rotary;
      params.AsAttentionParams()->rope = std::move(r);
      expectCompilesWithoutSpills(m.kernelFor(fb::OpKind::Attention, {qkv, qkv, qkv}, {out}, {},
                                              std::move(params), maxTokens, maxTokens > 0, bf16));
    }
  // Phi-2's Logits (bias) and Command R's (scale 0.0625): decode GEMV, prefill GEMM.
  for (int64_t maxTokens : {1, 16, 0}) {
    Mini m;
    int w = m.tensor(bf16, {51200, 2560}), b = m.tensor(bf16, {51200});
    int in = m.buffer(bf16, 2560), out = m.buffer(DType::F32, 51200);
    fb::StepParamsUnion params = test::logitsParams();
    params.AsLogitsParams()->bias = true;
    params.AsLogitsParams()->scale = 0.0625;
    expectCompilesWithoutSpills(m.kernelFor(fb::OpKind::Logits, {in}, {out}, {w, b},
                                            std::move(params), maxTokens, maxTokens > 0, bf16));
  }
}

} // namespace
} // namespace llmc
