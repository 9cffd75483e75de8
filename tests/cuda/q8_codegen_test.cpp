// The int8 linear layer's CUDA kernels (W8A16, codegen/cuda/ops/linear_q8.cpp,
// kernels/linear_q8.cuh) without a GPU: every form (decode GEMVs for
// T <= 1, 4, 16, the prefill tiles; per channel and grouped; f32 and f16
// scales; f32 and bf16 activations; bias, accumulate) is named for its
// specialization and compiles for sm_90a through NVRTC without spills; bad
// shapes are refused with the reason.
#include "cuda/nvrtc_compiler.h"
#include "cuda/ops/ops.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace llmc {
namespace {

using cuda::ops::Q8LinearShape;

TEST(CudaQ8Codegen, EveryFormCompilesForSm90aWithoutSpills) {
  struct Case {
    DType activation;
    int64_t n, k, group, maxTokens;
    bool halfScales, bias, accumulate;
    const char *name;
  } cases[] = {
      {DType::F32, 96, 256, 0, 1, false, false, false, "llmc_linear_q8_gemv_f32_wq8g0_n96_k256_t1"},
      {DType::BF16, 96, 256, 64, 4, true, true, true,
       "llmc_linear_q8_gemv_bf16_wq8g64h_n96_k256_t4_biasf32_acc"},
      {DType::BF16, 4096, 4096, 128, 16, true, false, true,
       "llmc_linear_q8_gemv_bf16_wq8g128h_n4096_k4096_t16_acc"},
      {DType::F32, 172, 200, 32, 0, false, true, false,
       "llmc_linear_q8_tiles_f32_wq8g32_n172_k200_t16_biasf32"}, // K not a multiple of 16
      {DType::BF16, 512, 64, 0, 0, false, false, false, "llmc_linear_q8_tiles_bf16_wq8g0_n512_k64_t16"},
  };
  std::set<std::string> names;
  for (const Case &c : cases) {
    Q8LinearShape s;
    s.n = c.n;
    s.k = c.k;
    s.groupSize = c.group;
    s.halfScales = c.halfScales;
    s.activation = s.output = c.activation;
    s.bias = c.bias;
    s.accumulate = c.accumulate;
    s.maxTokens = c.maxTokens;
    auto kernel = cuda::ops::q8LinearKernel(s);
    ASSERT_TRUE(kernel.isOk()) << kernel.message();
    EXPECT_EQ(kernel->name, c.name);
    EXPECT_TRUE(names.insert(kernel->name).second);
    EXPECT_EQ(kernel->launch.tokenAxis, c.maxTokens == 0 ? 2 : 0) << kernel->name;
    auto compiled = cuda::compileKernel(*kernel, fb::Target::Sm90a, "-");
    ASSERT_TRUE(compiled.isOk()) << compiled.message();
    EXPECT_FALSE(compiled->image.empty());
    EXPECT_FALSE(compiled->usage.spills()) << kernel->name << ": " << compiled->log;
    EXPECT_LE(compiled->usage.registers, 128) << kernel->name;
  }
}

// The fused forms GPU programs of `--quantize int8` plans use: an RMSNorm
// prologue (q/k/v), SwiGLU (gate/up) with and without it, at the tiny
// fixture's widths and the Llama-3-8B ones, decode and prefill tiles.
TEST(CudaQ8Codegen, FusedFormsCompileForSm90aWithoutSpills) {
  struct Case {
    DType activation;
    int64_t n, k, group, maxTokens;
    bool norm, gated;
    const char *name;
  } cases[] = {
      {DType::F32, 128, 64, 0, 1, true, false,
       "llmc_norm_linear_q8_gemv_f32_wq8g0_n128_k64_t1_eps3727c5ac"},
      {DType::F32, 64, 64, 32, 0, true, true,
       "llmc_norm_linear_swiglu_q8_tiles_f32_wq8g32h_n64_k64_t16_eps3727c5ac"},
      {DType::BF16, 6144, 4096, 128, 1, true, false,
       "llmc_norm_linear_q8_gemv_bf16_wq8g128h_n6144_k4096_t1_eps3727c5ac"},
      {DType::BF16, 14336, 4096, 128, 16, true, true,
       "llmc_norm_linear_swiglu_q8_gemv_bf16_wq8g128h_n14336_k4096_t16_eps3727c5ac"},
      {DType::BF16, 14336, 4096, 0, 0, true, true,
       "llmc_norm_linear_swiglu_q8_tiles_bf16_wq8g0_n14336_k4096_t16_eps3727c5ac"},
      {DType::BF16, 14336, 4096, 0, 4, false, true,
       "llmc_linear_swiglu_q8_gemv_bf16_wq8g0_n14336_k4096_t4"},
  };
  std::set<std::string> names;
  for (const Case &c : cases) {
    Q8LinearShape s;
    s.n = c.n;
    s.k = c.k;
    s.groupSize = c.group;
    s.halfScales = c.group > 0;
    s.activation = s.output = c.activation;
    s.maxTokens = c.maxTokens;
    s.norm = c.norm;
    s.eps = 1e-5f;
    s.gated = c.gated;
    auto kernel = cuda::ops::q8LinearKernel(s);
    ASSERT_TRUE(kernel.isOk()) << kernel.message();
    EXPECT_EQ(kernel->name, c.name);
    EXPECT_TRUE(names.insert(kernel->name).second);
    auto compiled = cuda::compileKernel(*kernel, fb::Target::Sm90a, "-");
    ASSERT_TRUE(compiled.isOk()) << compiled.message();
    EXPECT_FALSE(compiled->usage.spills()) << kernel->name << ": " << compiled->log;
  }
}

TEST(CudaQ8Codegen, BadShapesAreRefused) {
  Q8LinearShape s;
  s.n = 8;
  s.k = 64;
  s.groupSize = 48;
  auto bad = cuda::ops::q8LinearKernel(s);
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.message().find("group size 48"), std::string::npos) << bad.message();
  s.groupSize = 0;
  s.n = 0;
  EXPECT_FALSE(cuda::ops::q8LinearKernel(s).isOk());
}

} // namespace
} // namespace llmc
