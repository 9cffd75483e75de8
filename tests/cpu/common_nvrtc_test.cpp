// The shared host/device headers (runtime/kernels/common) compile under NVRTC
// for sm_90a, as codegen will compile them into generated kernels. Needs the
// NVRTC library only, no GPU.
#include <gtest/gtest.h>

#include <nvrtc.h>

#include <string>

namespace {

const char *kKernel = R"(
#include "kernels/common/activations.h"
#include "kernels/common/attention_scores.h"
#include "kernels/common/half.h"
#include "kernels/common/int4.h"
#include "kernels/common/online_softmax.h"
#include "kernels/common/rope.h"
#include "kernels/common/sampling.h"

extern "C" __global__ void useEveryHelper(float *out, const unsigned short *in) {
  using namespace llmc::hd;
  float x = bf16ToF32(in[0]) + f16ToF32(in[1]);
  SoftmaxMerge m = softmaxPush(softmaxEmpty(), x);
  RopeScaling s;
  s.kind = RopeScalingKind::Llama3;
  s.factor = 8.0f;
  float inv = ropeInvFreq(threadIdx.x, 128, 500000.0f, s);
  float a = x, b = inv;
  float angle = ropeAngle(threadIdx.x, inv);
  ropeRotate(a, b, cosF(angle), sinF(angle));
  RopeScaling dyn;
  dyn.kind = ropeDependsOnLength(RopeScalingKind::Dynamic) ? RopeScalingKind::Dynamic
                                                           : RopeScalingKind::Yarn;
  dyn.originalMaxPositions = 2048.0f;
  int first, second;
  ropePairFeatures(threadIdx.x, 64, true, first, second);
  float c, sn;
  ropeCosSin(first + second, ropeInvFreqAt(threadIdx.x, 64, 1e4f, dyn, 3000), 1.1f, c, sn);
  a += c + sn;
  i32 q[8];
  int4Unpack8(0x12345678u, q);
  float probs[2] = {a, b};
  AttentionScores scores;
  scores.window = 16;
  scores.softcap = 50.0f;
  a += softCap(x, scores.softcap) + static_cast<float>(windowStart(threadIdx.x, scores.window));
  a += gated(kGateGeluTanh, x, b) + gated(kGateGeluErf, x, b) + gated(kGateSilu, x, b);
  out[threadIdx.x] = a + b + m.state.sum * softmaxInvSum(m.state) + int4Dequant(q[3], 8, 0.1f) +
                     f32ToBf16(x) + f32ToF16(x) + repetitionPenalty(x, 1.1f) +
                     (minPKeeps(x, 1.0f, 0.1f) ? 1.0f : 0.0f) + topPKeepCount(probs, 2, 0.9f);
}
)";

TEST(CommonHeaders, CompileWithNvrtcForSm90a) {
  nvrtcProgram program;
  ASSERT_EQ(nvrtcCreateProgram(&program, kKernel, "common_headers.cu", 0, nullptr, nullptr),
            NVRTC_SUCCESS);
  std::string include = std::string("--include-path=") + LLMC_RUNTIME_DIR;
  const char *options[] = {"--gpu-architecture=compute_90a", "--std=c++17", include.c_str()};
  nvrtcResult result = nvrtcCompileProgram(program, 3, options);
  size_t logSize = 0;
  nvrtcGetProgramLogSize(program, &logSize);
  std::string log(logSize, '\0');
  nvrtcGetProgramLog(program, log.data());
  EXPECT_EQ(result, NVRTC_SUCCESS) << log;
  size_t ptxSize = 0;
  if (result == NVRTC_SUCCESS) {
    nvrtcGetPTXSize(program, &ptxSize);
    EXPECT_GT(ptxSize, 0u);
  }
  nvrtcDestroyProgram(&program);
}

} // namespace
