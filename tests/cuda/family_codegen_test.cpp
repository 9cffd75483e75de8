// Every family and RoPE scaling of tests/data/hf whose steps once had no
// CUDA kernel builds for sm_90a (`--target sm_90a`, where a step without a
// kernel is an error naming it): LayerNorm with and without bias (StableLM,
// Starcoder2, Phi, GPT-NeoX, Cohere), per-head RMSNorm (Qwen3's q/k norm),
// ungated GELU MLPs as Activation steps, partial rotary (StableLM, Phi,
// GPT-NeoX), interleaved pairs (Cohere), Logits with a bias (Phi) or a scale
// (Cohere), and yarn, dynamic NTK and longrope RoPE. Each build compiles
// every kernel with NVRTC without a register spill (a spill is a build
// warning, and a warning fails here), and the plan carries the feature in
// an sm_90a program: the test reads it from the steps, so a fixture that
// lost its feature fails instead of passing vacuously. Phi also builds with
// int4 (RTN) and int8 weights; so does Granite, whose residual_multiplier is
// its o_proj and down_proj Linears' output_scale, in the kernels' names
// (`_os<bits>`, a literal in their source) in every weight format.
#include "common/test_paths.h"
#include "driver/build.h"
#include "ops/rope.h"
#include "plan/plan.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace llmc {
namespace {

// The CUDA-relevant features of a plan's sm_90a programs, by name.
std::set<std::string> gpuFeatures(const Plan &plan, std::set<std::string> *kernels) {
  std::set<std::string> features;
  int scaledSteps = 0, namedSteps = 0; // steps with an output_scale; those whose kernel names it
  const fb::KernelModule *module = plan.module(fb::Target::Sm90a);
  for (const fb::Program *program : *plan.meta().programs()) {
    if (program->target() != fb::Target::Sm90a)
      continue;
    for (const fb::Step *step : *program->steps()) {
      std::string kernel;
      if (module != nullptr && step->kernel() >= 0)
        kernels->insert(kernel = module->functions()->Get(step->kernel())->str());
      if (const fb::LinearParams *l = step->params_as_LinearParams())
        if (l->output_scale() != 1.0f) {
          features.insert("output_scale");
          // The scale's f32 bits in the kernel's name: 0.5 is 3f000000.
          char bits[16];
          const float scale = l->output_scale();
          uint32_t u;
          std::memcpy(&u, &scale, sizeof(u));
          std::snprintf(bits, sizeof(bits), "_os%08x", u);
          ++scaledSteps;
          namedSteps += kernel.find(bits) != std::string::npos;
        }
      if (const fb::NormParams *n = step->params_as_NormParams()) {
        features.insert(n->kind() == fb::NormKind::Layer ? "layer_norm" : "rms_norm");
        if (n->bias())
          features.insert("norm_bias");
        if (n->group_width() > 0)
          features.insert("norm_groups");
      }
      if (const fb::ActivationParams *a = step->params_as_ActivationParams())
        features.insert(std::string(a->gated() ? "gated_" : "") +
                        fb::EnumNameActivationKind(a->activation()));
      if (const fb::LogitsParams *l = step->params_as_LogitsParams()) {
        if (l->scale() != 1.0)
          features.insert("logit_scale");
        if (l->bias())
          features.insert("logit_bias");
      }
      if (const fb::RopeParams *rope = ops::stepRope(*step)) {
        const ops::RopeConfig c = ops::ropeConfig(*rope);
        if (c.rotaryDim < plan.meta().model()->head_dim())
          features.insert("partial_rotary");
        if (c.interleaved)
          features.insert("interleaved");
        if (c.scaling.attentionFactor != 1.0f)
          features.insert("attention_factor");
        if (c.scaling.kind == hd::RopeScalingKind::Dynamic)
          features.insert("dynamic");
        if (c.scaling.kind == hd::RopeScalingKind::LongRope)
          features.insert("longrope");
      }
    }
  }
  if (scaledSteps > 0 && namedSteps == scaledSteps)
    features.insert("output_scale_kernel"); // every output_scale in its step's kernel
  return features;
}

struct Family {
  const char *fixture;
  std::vector<const char *> features; // each must be in an sm_90a program
  const char *kernelPrefix;           // some kernel's name starts with it ("": no check)
  const char *quantize = "";          // --quantize (groups of 32)
  const char *name = nullptr;         // the test's name (default: the fixture's)
};

class CudaFamilyCodegen : public ::testing::TestWithParam<Family> {};

TEST_P(CudaFamilyCodegen, BuildsForSm90aWithEveryFeatureOnTheGpu) {
  const Family &family = GetParam();
  BuildOptions options;
  options.input = test::testDataPath(std::string("hf/") + family.fixture);
  options.output = test::scratchDir(std::string("cuda-family-") + family.fixture +
                                    family.quantize) +
                   "/x.plan";
  options.targets = "sm_90a";
  options.quantize = family.quantize;
  options.groupSize = 32;
  std::vector<std::string> warnings;
  BuildReporter reporter;
  reporter.info = reporter.verbose = reporter.ir = [](const std::string &) {};
  reporter.warning = [&](const std::string &text) { warnings.push_back(text); };
  Status status = runBuild(options, reporter);
  ASSERT_TRUE(status.isOk()) << status.message();
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  auto plan = Plan::open(options.output);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  ASSERT_NE(plan->program(fb::Target::Sm90a, fb::Phase::Prefill), nullptr);
  ASSERT_NE(plan->program(fb::Target::Sm90a, fb::Phase::Decode, 1), nullptr);
  std::set<std::string> kernels;
  const std::set<std::string> features = gpuFeatures(*plan, &kernels);
  std::string have;
  for (const std::string &f : features)
    have += f + " ";
  for (const char *feature : family.features)
    EXPECT_TRUE(features.count(feature)) << feature << " not in the sm_90a programs: " << have;
  if (*family.kernelPrefix != '\0') {
    bool found = false;
    for (const std::string &k : kernels)
      found |= k.rfind(family.kernelPrefix, 0) == 0;
    EXPECT_TRUE(found) << "no kernel named " << family.kernelPrefix << "...";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Families, CudaFamilyCodegen,
    ::testing::Values(
        Family{"stablelm", {"layer_norm", "norm_bias", "partial_rotary"}, "llmc_layer_norm_"},
        Family{"starcoder2", {"layer_norm", "norm_bias", "GeluTanh"}, "llmc_gelu_tanh_"},
        Family{"phi", {"layer_norm", "norm_bias", "partial_rotary", "GeluTanh", "logit_bias"},
               "llmc_logits_gemv_"},
        Family{"gpt-neox", {"layer_norm", "norm_bias", "partial_rotary", "GeluErf"},
               "llmc_gelu_erf_"},
        Family{"cohere", {"layer_norm", "interleaved", "logit_scale"}, "llmc_logits_gemm_"},
        Family{"qwen3", {"rms_norm", "norm_groups"}, "llmc_rms_norm_"},
        Family{"olmo2", {"rms_norm"}, "llmc_rms_norm_"},
        Family{"llama-yarn", {"attention_factor"}, "llmc_attention_"},
        Family{"long-dynamic", {"dynamic"}, "llmc_attention_"},
        Family{"llama-longrope", {"longrope", "attention_factor"}, "llmc_attention_"},
        // Per-head (1 + w) q/k norms with a RoPE base per layer type (Gemma3), NoPE
        // global layers (EXAONE 4), Phi-3's longrope with packed projections.
        Family{"gemma3", {"rms_norm", "norm_groups"}, "llmc_rms_norm_"},
        Family{"exaone4", {"rms_norm", "norm_groups"}, "llmc_rms_norm_"},
        Family{"phi3-longrope-short", {"longrope", "attention_factor"}, "llmc_attention_"},
        // Llama under published names: EXAONE 3.5's renamed tensors with llama3 RoPE,
        // InternLM2's wqkv split at import with dynamic NTK.
        // (Their RMSNorms fuse into the next Linear, as Llama's.)
        Family{"exaone35-tied", {}, "llmc_attention_"},
        Family{"internlm2", {"dynamic"}, "llmc_attention_"},
        // int4 and int8 weights beside LayerNorm, partial rotary and a Logits bias.
        Family{"phi", {"layer_norm", "partial_rotary", "logit_bias"}, "llmc_linear_q4_", "rtn",
               "phi_rtn"},
        Family{"phi", {"layer_norm", "partial_rotary", "logit_bias"}, "llmc_linear_q8_", "int8",
               "phi_int8"},
        // Granite's output_scale in the float, int4 and int8 linears, its logit scale.
        Family{"granite", {"output_scale", "output_scale_kernel", "logit_scale"}, "llmc_linear_"},
        Family{"granite", {"output_scale", "output_scale_kernel"}, "llmc_linear_q4_", "rtn",
               "granite_rtn"},
        Family{"granite", {"output_scale", "output_scale_kernel"}, "llmc_linear_q8_", "int8",
               "granite_int8"}),
    [](const auto &info) {
      std::string name = info.param.name ? info.param.name : info.param.fixture;
      for (char &c : name)
        if (c == '-')
          c = '_';
      return name;
    });

} // namespace
} // namespace llmc
