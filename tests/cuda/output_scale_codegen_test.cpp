// A Linear step's output_scale (Granite's residual_multiplier) reaches the
// kernel of every linear form without a GPU: the decode GEMVs (split-K
// too), the FMA and tensor-core GEMMs, int4 and int8. The scaled kernel
// names the scale (`_os<f32 bits>`) and passes it as a literal in its call,
// its unscaled twin keeps the source it had (no scale argument), and each
// scaled kernel compiles for sm_90a through NVRTC without spills.
// cuda_fake_driver_test launches Granite plans with them;
// GpuKernels.OutputScaledLinearsMatchCpu compares them with the CPU on a GPU.
#include "common/step_params.h"
#include "cuda/mini_plan.h"
#include "cuda/nvrtc_compiler.h"
#include "kernels/common/q4_layout.h"
#include "kernels/common/q8_layout.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace llmc {
namespace {

enum class Format { Dense, Q4, Q8 };

struct Case {
  const char *name;
  Format format;
  DType activation;
  int64_t n, k, maxTokens; // maxTokens 0: the GEMM of programs for any T
  bool bias;
  const char *family; // the kernel's name starts with it
};

// The kernel of y[T, N] (+)= s * (x . W^T (+ bias)), with the residual add.
Expected<cuda::KernelInstance> scaledLinear(const Case &c, float outputScale) {
  test::MiniPlan p;
  std::vector<int> weights;
  const int64_t group = 32;
  switch (c.format) {
  case Format::Dense:
    weights.push_back(p.tensor(c.activation, {c.n, c.k}));
    break;
  case Format::Q4:
    weights.push_back(p.tensor(DType::I32, {c.n, hd::q4WordsPerRow(c.k)}));
    weights.push_back(p.tensor(DType::F16, {c.n, hd::q4NumGroups(c.k, group)}));
    weights.push_back(p.tensor(DType::F16, {c.n, hd::q4NumGroups(c.k, group)}));
    break;
  case Format::Q8:
    weights.push_back(p.tensor(DType::I8, {c.n, hd::q8RowBytes(c.k)}));
    weights.push_back(p.tensor(DType::F32, {c.n, hd::q8NumGroups(c.k, group)}));
    break;
  }
  if (c.bias)
    weights.push_back(p.tensor(DType::F32, {c.n}));
  fb::StepParamsUnion params =
      test::linearParams({.q4 = c.format == Format::Q4, .groupSize = group, .bias = c.bias,
                          .accumulate = true});
  fb::LinearParamsT &linear = *params.AsLinearParams();
  linear.output_scale = outputScale;
  if (c.format == Format::Q8)
    linear.weights = fb::WeightFormat::Q8;
  const int in = p.buffer(c.activation, c.k), out = p.buffer(c.activation, c.n);
  return p.kernelFor(fb::OpKind::Linear, {in}, {out}, weights, std::move(params), c.maxTokens,
                     c.maxTokens > 0, c.activation);
}

TEST(CudaOutputScaleCodegen, EveryLinearFormCarriesTheScaleAndCompilesForSm90a) {
  const Case cases[] = {
      {"gemv", Format::Dense, DType::F32, 77, 136, 1, false, "llmc_linear_gemv_f32_"},
      {"gemv bias", Format::Dense, DType::BF16, 77, 136, 4, true, "llmc_linear_gemv_bf16_"},
      {"gemv split-K", Format::Dense, DType::BF16, 24, 4096, 2, false,
       "llmc_linear_gemv_bf16_n24_k4096_t2_s"},
      {"gemm fma", Format::Dense, DType::F32, 130, 200, 0, true, "llmc_linear_gemm_fma_"},
      {"gemm mma", Format::Dense, DType::BF16, 130, 200, 0, false, "llmc_linear_gemm_mma_"},
      {"int4 gemv", Format::Q4, DType::BF16, 96, 256, 1, true, "llmc_linear_q4_gemv_"},
      {"int4 gemm mma", Format::Q4, DType::BF16, 96, 256, 0, false, "llmc_linear_q4_gemm_mma_"},
      {"int8 gemv", Format::Q8, DType::BF16, 96, 256, 1, true, "llmc_linear_q8_gemv_"},
      {"int8 tiles", Format::Q8, DType::F32, 96, 256, 0, false, "llmc_linear_q8_tiles_"},
  };
  const std::string literal = "0x1p-1f"; // 0.5 as the generators write it
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    auto plain = scaledLinear(c, 1.0f);
    auto scaled = scaledLinear(c, 0.5f);
    ASSERT_TRUE(plain.isOk()) << plain.message();
    ASSERT_TRUE(scaled.isOk()) << scaled.message();
    EXPECT_EQ(scaled->name.rfind(c.family, 0), 0u) << scaled->name;
    EXPECT_NE(scaled->name.find("_os3f000000"), std::string::npos) << scaled->name;
    EXPECT_EQ(plain->name.find("_os"), std::string::npos) << plain->name;
    // The call passes the scale as its last argument; the unscaled one none.
    EXPECT_NE(scaled->source.find(", " + literal + ")"), std::string::npos) << scaled->source;
    EXPECT_EQ(plain->source.find(literal), std::string::npos) << plain->source;
    EXPECT_EQ(scaled->launch.grid, plain->launch.grid);
    auto compiled = cuda::compileKernel(*scaled, fb::Target::Sm90a, "-");
    ASSERT_TRUE(compiled.isOk()) << compiled.message();
    EXPECT_FALSE(compiled->image.empty());
    EXPECT_FALSE(compiled->usage.spills()) << scaled->name << ": " << compiled->log;
  }
}

} // namespace
} // namespace llmc
