// Attention kernel instances for tests, built from hand-made plans (no
// device needed), and their sliding-window / soft-capped variants. Until plans
// carry a window and a softcap, kernel_gen passes 0 and 0: the generated call
// ends in ">(args, <scale>, <window>, <softcap literal>)", which withAttentionScores
// rewrites (and renames the entry point, as kernel_gen does for non-zero values).
#pragma once

#include "common/step_params.h"
#include "cuda/kernel_gen.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

namespace llmc::test {

// An attention step: heads, KV heads, head dim, max_seq_len; packed: a
// RopeAttention on one qkv buffer (RoPE on the fly), else a plain Attention.
struct AttentionKernelSpec {
  DType activation;
  bool decode, packed;
  int64_t heads, kvHeads, D, maxSeq;
  int64_t blockSize = 16;
};

inline Expected<cuda::KernelInstance> attentionKernel(const AttentionKernelSpec &s) {
  fb::PlanT plan;
  plan.model = std::make_unique<fb::ModelInfoT>();
  plan.model->max_seq_len = s.maxSeq;
  plan.kv_cache = std::make_unique<fb::KvCacheInfoT>();
  plan.kv_cache->block_size = static_cast<int32_t>(s.blockSize);
  fb::ProgramT program;
  auto buffer = [&](int64_t width) {
    auto b = std::make_unique<fb::BufferT>();
    b->dtype = static_cast<fb::DType>(s.activation);
    b->width = width;
    program.buffers.push_back(std::move(b));
    return static_cast<int>(program.buffers.size()) - 1;
  };
  fb::StepT step;
  const int64_t qWidth = s.heads * s.D, kvWidth = s.kvHeads * s.D;
  step.op = fb::OpKind::Attention;
  test::AttentionShape a{.heads = s.heads, .kvHeads = s.kvHeads, .headDim = s.D};
  a.scale = 1.0 / std::sqrt(static_cast<double>(s.D));
  if (s.packed) {
    int qkv = buffer(qWidth + 2 * kvWidth);
    step.inputs = {qkv, qkv, qkv};
    a.kColumn = qWidth;
    a.vColumn = qWidth + kvWidth;
    a.rope = true;
  } else {
    step.inputs = {buffer(qWidth), buffer(kvWidth), buffer(kvWidth)};
  }
  step.params = test::attentionParams(a);
  step.outputs = {buffer(qWidth)};
  cuda::ProgramShape shape;
  shape.activation = s.activation;
  shape.maxTokens = s.decode ? 4 : 0;
  shape.decode = s.decode;
  return cuda::kernelForStep(plan, program, step, shape);
}

// `kernel` (an attention instance with window 0 and no softcap) with a
// sliding window and a softcap (0: off) baked in, under its own name.
inline cuda::KernelInstance withAttentionScores(cuda::KernelInstance kernel, int window,
                                                float softcap) {
  const std::string call = ">(args, ", marker = ", ";
  const size_t args = kernel.source.rfind(call);
  const size_t at = args == std::string::npos ? args : kernel.source.find(marker, args + call.size());
  const size_t close = at == std::string::npos ? at : kernel.source.find(')', at);
  if (close == std::string::npos) {
    ADD_FAILURE() << kernel.name << ": no attention call (args, scale, ...) in its source";
    return kernel;
  }
  EXPECT_EQ(kernel.source.substr(at + marker.size(), close - at - marker.size()), "0, 0x0p+0f")
      << kernel.name << ": kernel_gen no longer passes window 0 and softcap 0";
  char literal[64], tag[16];
  std::snprintf(literal, sizeof(literal), "%af", static_cast<double>(softcap));
  uint32_t bits;
  std::memcpy(&bits, &softcap, 4);
  std::snprintf(tag, sizeof(tag), "%08x", bits);
  kernel.source.replace(at + marker.size(), close - at - marker.size(),
                        std::to_string(window) + ", " + literal);
  const std::string renamed = kernel.name + "_w" + std::to_string(window) + "_cap" + tag;
  for (size_t p = kernel.source.find(kernel.name); p != std::string::npos;
       p = kernel.source.find(kernel.name, p + renamed.size()))
    kernel.source.replace(p, kernel.name.size(), renamed);
  kernel.name = renamed;
  return kernel;
}

} // namespace llmc::test
