// An int4 GEMM with an RMSNorm prologue and a bias (RmsNormLinearQ4 with
// five weights: gamma, qweight, scales, zeros, bias) without a GPU: every
// form of its kernel (the decode GEMVs, the FMA GEMM, the bf16 tensor-core
// GEMM) carries the bias and compiles for sm_90a through NVRTC without
// spills. The launch passes the five weights as one device array
// (runtime/cuda/kernel_abi.h); cuda_fake_driver_test runs a plan with them.
#include "common/step_params.h"
#include "cuda/kernel_gen.h"
#include "cuda/nvrtc_compiler.h"
#include "kernels/common/q4_layout.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace llmc {
namespace {

// The kernel of one RmsNormLinearQ4 step y[T, N] = rmsnorm(x) . W^T + bias,
// K = 256 in groups of 64, for `maxTokens` rows (0: any, the GEMM).
Expected<cuda::KernelInstance> normLinearQ4WithBias(DType activation, int64_t maxTokens) {
  const int64_t n = 96, k = 256, group = 64;
  fb::PlanT plan;
  auto tensor = [&](fb::DType dtype, std::vector<int64_t> shape) {
    auto t = std::make_unique<fb::TensorT>();
    t->name = "t" + std::to_string(plan.tensors.size());
    t->dtype = dtype;
    t->shape = std::move(shape);
    plan.tensors.push_back(std::move(t));
    return static_cast<int>(plan.tensors.size()) - 1;
  };
  fb::ProgramT program;
  auto buffer = [&](int64_t width) {
    auto b = std::make_unique<fb::BufferT>();
    b->dtype = static_cast<fb::DType>(activation);
    b->width = width;
    program.buffers.push_back(std::move(b));
    return static_cast<int>(program.buffers.size()) - 1;
  };
  fb::StepT step;
  step.op = fb::OpKind::Linear;
  step.inputs = {buffer(k)};
  step.outputs = {buffer(n)};
  step.weights = {tensor(fb::DType::F32, {k}),
                  tensor(fb::DType::I32, {n, hd::q4WordsPerRow(k)}),
                  tensor(fb::DType::F16, {n, hd::q4NumGroups(k, group)}),
                  tensor(fb::DType::F16, {n, hd::q4NumGroups(k, group)}),
                  tensor(fb::DType::F32, {n})};
  fb::LinearParamsT p; // RMSNorm prologue, int4 weights, bias, the residual add
  p.prologue = std::make_unique<fb::NormParamsT>(test::rms(1e-6));
  p.weights = fb::WeightFormat::Q4;
  p.group_size = group;
  p.bias = true;
  p.accumulate = true;
  step.params.Set(std::move(p));
  cuda::ProgramShape shape;
  shape.activation = activation;
  shape.maxTokens = maxTokens;
  shape.decode = maxTokens > 0;
  return cuda::kernelForStep(plan, program, step, shape);
}

TEST(CudaInt4BiasCodegen, NormGemmWithABiasCompilesForSm90aInEveryForm) {
  struct Case {
    DType activation;
    int64_t maxTokens;
    const char *prefix;
  } cases[] = {
      {DType::F32, 1, "llmc_norm_linear_q4_gemv_f32_wq4g64_n96_k256_t1_biasf32_acc_eps"},
      {DType::BF16, 4, "llmc_norm_linear_q4_gemv_bf16_wq4g64_n96_k256_t4_biasf32_acc_eps"},
      {DType::F32, 0, "llmc_norm_linear_q4_gemm_fma_f32_wq4g64_n96_k256_biasf32_acc_eps"},
      {DType::BF16, 0, "llmc_norm_linear_q4_gemm_mma_bf16_wq4g64_n96_k256_biasf32_acc_eps"},
  };
  for (const Case &c : cases) {
    auto kernel = normLinearQ4WithBias(c.activation, c.maxTokens);
    ASSERT_TRUE(kernel.isOk()) << kernel.message();
    EXPECT_EQ(kernel->name.rfind(c.prefix, 0), 0u) << kernel->name;
    // BIAS (the template flag after ACCUM) is on.
    EXPECT_NE(kernel->source.find("true, true"), std::string::npos) << kernel->source;
    auto compiled = cuda::compileKernel(*kernel, fb::Target::Sm90a, "-");
    ASSERT_TRUE(compiled.isOk()) << compiled.message();
    EXPECT_FALSE(compiled->image.empty());
    EXPECT_FALSE(compiled->usage.spills()) << kernel->name << ": " << compiled->log;
  }
}

} // namespace
} // namespace llmc
