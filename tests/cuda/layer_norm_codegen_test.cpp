// The CUDA LayerNorm device function (codegen/cuda/kernels/layer_norm.cuh)
// compiles for sm_90a through NVRTC without a GPU, in every form the
// LayerNorm families need: whole rows with and without bias (f32 and bf16
// activations, f32 and bf16 weights), per-head groups with per-feature
// weights (Cohere's q/k norm) and shared weights with bias (Phi's), at the
// tiny test shapes and at real widths, without register spills.
#include "cuda/nvrtc_compiler.h"

#include <gtest/gtest.h>

#include <string>

namespace llmc {
namespace {

struct Form {
  const char *activation, *weight;
  int width, group;
  bool shared, bias;
};

cuda::KernelInstance layerNormKernel(const Form &f) {
  cuda::KernelInstance k;
  k.name = std::string("llmc_test_layer_norm_") + f.activation + "_" + f.weight + "_w" +
           std::to_string(f.width) + "_g" + std::to_string(f.group) + (f.shared ? "_shared" : "") +
           (f.bias ? "_bias" : "");
  std::string ta = std::string(f.activation) == "float" ? "float" : "llmc::dev::bf16";
  std::string tw = std::string(f.weight) == "float" ? "float" : "llmc::dev::bf16";
  k.source = "#include \"llmc/layer_norm.cuh\"\n\nextern \"C\" __global__ void "
             "__launch_bounds__(256) " +
             k.name + "(const llmc::abi::StepArgs args) {\n  llmc::dev::layerNorm<" + ta + ", " +
             tw + ", " + std::to_string(f.width) + ", " + std::to_string(f.group) + ", " +
             (f.shared ? "true" : "false") + ", " + (f.bias ? "true" : "false") +
             ", 256>(args, 1e-5f, 0.0f);\n}\n";
  k.launch.block = {256, 1, 1};
  return k;
}

TEST(CudaLayerNormCodegen, EveryFormCompilesForSm90a) {
  const Form forms[] = {
      {"float", "float", 64, 64, false, true},     // the reference fixtures
      {"bf16", "float", 64, 64, false, false},     // Cohere, bf16 activations
      {"bf16", "bf16", 2560, 2560, false, true},   // Phi-2's width
      {"float", "float", 8192, 8192, false, false}, // Command R's width
      {"bf16", "float", 8192, 128, false, false},  // Cohere q_norm: 64 heads of 128
      {"float", "float", 2560, 80, true, true},    // Phi qk_layernorm: shared, 32 heads of 80
      {"float", "bf16", 64, 16, false, false},     // StableLM per-head, tiny
  };
  for (const Form &f : forms) {
    cuda::KernelInstance k = layerNormKernel(f);
    SCOPED_TRACE(k.name);
    auto compiled = cuda::compileKernel(k, fb::Target::Sm90a, "-");
    ASSERT_TRUE(compiled.isOk()) << compiled.message() << "\n" << k.source;
    EXPECT_FALSE(compiled->image.empty());
    EXPECT_FALSE(compiled->usage.spills()) << compiled->log;
  }
}

// A group width that does not divide the row is a compile error, not a
// silently wrong kernel.
TEST(CudaLayerNormCodegen, GroupMustDivideTheRow) {
  cuda::KernelInstance k = layerNormKernel({"float", "float", 64, 24, false, false});
  auto compiled = cuda::compileKernel(k, fb::Target::Sm90a, "-");
  ASSERT_FALSE(compiled.isOk());
  EXPECT_NE(compiled.message().find("the group width must divide the row"), std::string::npos)
      << compiled.message();
}

} // namespace
} // namespace llmc
