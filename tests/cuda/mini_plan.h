// A plan holding only what cuda::kernelForStep reads, for tests that
// generate one step's kernel: the codegen tests (no GPU) and the GPU tests.
#pragma once

#include "cuda/kernel_gen.h"
#include "schema/engine_generated.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace llmc::test {

// A plan with nothing but what kernelForStep reads: model hyperparameters,
// the KV geometry, tensors, one program's buffers.
struct MiniPlan {
  fb::PlanT plan;
  fb::ProgramT program;

  explicit MiniPlan(int64_t maxSeqLen = 300) {
    plan.model = std::make_unique<fb::ModelInfoT>();
    plan.model->max_seq_len = maxSeqLen;
    plan.kv_cache = std::make_unique<fb::KvCacheInfoT>();
    plan.kv_cache->block_size = 16;
  }
  int tensor(DType dtype, std::vector<int64_t> shape) {
    auto t = std::make_unique<fb::TensorT>();
    t->name = "t" + std::to_string(plan.tensors.size());
    t->dtype = static_cast<fb::DType>(dtype);
    t->shape = std::move(shape);
    plan.tensors.push_back(std::move(t));
    return static_cast<int>(plan.tensors.size()) - 1;
  }
  int buffer(DType dtype, int64_t width) {
    auto b = std::make_unique<fb::BufferT>();
    b->dtype = static_cast<fb::DType>(dtype);
    b->width = width;
    program.buffers.push_back(std::move(b));
    return static_cast<int>(program.buffers.size()) - 1;
  }
  // The step's kernel for a program of T <= maxTokens (0: prefill-style),
  // or the generator's error. `params`: the kind's table
  // (tests/common/step_params.h builds them).
  Expected<cuda::KernelInstance> kernelFor(fb::OpKind op, std::vector<int> in, std::vector<int> out,
                                           std::vector<int> weights, fb::StepParamsUnion params,
                                           int64_t maxTokens, bool decode, DType activation) {
    fb::StepT step;
    step.op = op;
    step.inputs = std::move(in);
    step.outputs = std::move(out);
    step.weights = std::move(weights);
    step.params = std::move(params);
    cuda::ProgramShape shape;
    shape.activation = activation;
    shape.maxTokens = maxTokens;
    shape.decode = decode;
    return cuda::kernelForStep(plan, program, step, shape);
  }
  // kernelFor, which must succeed.
  cuda::KernelInstance kernel(fb::OpKind op, std::vector<int> in, std::vector<int> out,
                              std::vector<int> weights, fb::StepParamsUnion params,
                              int64_t maxTokens, bool decode, DType activation) {
    auto k = kernelFor(op, std::move(in), std::move(out), std::move(weights), std::move(params),
                       maxTokens, decode, activation);
    EXPECT_TRUE(k.isOk()) << k.message();
    return k.isOk() ? *k : cuda::KernelInstance{};
  }
};

} // namespace llmc::test
