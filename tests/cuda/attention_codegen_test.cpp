// Sliding-window and soft-capped attention kernels without a GPU: what
// kernel_gen emits today (window 0, softcap 0: the plain kernel, unchanged
// names), and every variant (prefill tiles, flash-decoding splits, RoPE on
// packed qkv, f32 and bf16, GQA) compiling for sm_90a through NVRTC, the
// 8B shape without register spills.
#include "cuda/attention_variants.h"
#include "cuda/nvrtc_compiler.h"

namespace llmc {
namespace {

using test::AttentionKernelSpec;

TEST(CudaAttentionCodegen, PlansWithoutWindowsGetThePlainKernel) {
  for (bool decode : {false, true}) {
    auto k = test::attentionKernel({DType::BF16, decode, true, 8, 2, 64, 300});
    ASSERT_TRUE(k.isOk()) << k.message();
    EXPECT_EQ(k->name.find("_w"), std::string::npos) << k->name;
    EXPECT_EQ(k->name.find("_cap"), std::string::npos) << k->name;
    EXPECT_NE(k->source.find(", 0, 0x0p+0f)"), std::string::npos) << k->source;
    cuda::KernelInstance windowed = test::withAttentionScores(*k, 16, 50.0f);
    EXPECT_NE(windowed.name, k->name);
    EXPECT_NE(windowed.source.find(", 16, 0x1.9p+5f)"), std::string::npos)
        << windowed.source;
    EXPECT_EQ(windowed.source.find(k->name + "("), std::string::npos) << "entry point renamed";
  }
}

void expectCompiles(const AttentionKernelSpec &spec, int window, float softcap,
                    bool requireNoSpills) {
  auto k = test::attentionKernel(spec);
  ASSERT_TRUE(k.isOk()) << k.message();
  cuda::KernelInstance variant = test::withAttentionScores(*k, window, softcap);
  auto compiled = cuda::compileKernel(variant, fb::Target::Sm90a, "-");
  ASSERT_TRUE(compiled.isOk()) << compiled.message();
  EXPECT_FALSE(compiled->image.empty()) << variant.name;
  if (requireNoSpills)
    EXPECT_FALSE(compiled->usage.spills()) << variant.name << "\n" << compiled->log;
}

TEST(CudaAttentionCodegen, WindowedAndSoftcappedVariantsCompileForSm90a) {
  for (bool decode : {false, true}) {
    // Small GQA shape: f32 unpacked, bf16 RoPE on packed qkv.
    expectCompiles({DType::F32, decode, false, 8, 2, 64, 300}, 16, 0.0f, false);
    expectCompiles({DType::BF16, decode, true, 8, 2, 64, 300}, 16, 50.0f, false);
    expectCompiles({DType::BF16, decode, true, 8, 2, 64, 300}, 0, 30.0f, false);
    // Llama-3-8B / Mistral-7B attention shape (32 heads / 8 KV heads of 128).
    expectCompiles({DType::BF16, decode, true, 32, 8, 128, 8192}, 4096, 50.0f, true);
  }
}

} // namespace
} // namespace llmc
