// The loader's checks of int4 linear steps (LinearQ4, engine.fbs): a tiny
// plan with one int4 projection loads, and each corruption of its tensors
// or parameters is rejected with a message that names the file, the step,
// the tensor and what the layout expects.
#include "common/test_paths.h"
#include "cpu/backend/cpu_backend.h"
#include "engine/engine.h"
#include "kernels/common/q4_layout.h"
#include "ops/op_table.h"
#include "plan/plan_fixture.h"

#include <cmath>
#include <functional>

namespace llmc {
namespace {

using test::kHidden;
using test::makeQ4Plan;
using test::Q4Plan;

std::string writeQ4Plan(const std::string &name,
                        const std::function<void(Q4Plan &)> &edit = nullptr) {
  auto p = makeQ4Plan();
  if (edit)
    edit(*p);
  std::string path = test::scratchDir("q4-plan-" + name) + "/tiny.plan";
  auto written = writePlan(path, p->tiny.contents);
  EXPECT_TRUE(written.isOk()) << written.message();
  return path;
}

// Opens the plan after `mutate` edited its metadata; returns the error.
std::string corrupt(const std::string &name, const std::function<void(fb::PlanT &)> &mutate) {
  std::string path = writeQ4Plan(name);
  test::rewriteMetadata(path, mutate);
  auto plan = Plan::open(path);
  EXPECT_FALSE(plan.isOk()) << name << " was accepted";
  std::string message = plan.isOk() ? "" : plan.message();
  EXPECT_NE(message.find(path), std::string::npos) << message;
  return message;
}

void expectContains(const std::string &message, const std::string &part) {
  EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

TEST(Q4Plan, ValidPlanLoads) {
  auto plan = Plan::open(writeQ4Plan("valid"));
  ASSERT_TRUE(plan.isOk()) << plan.message();
  const fb::Step &linear = *plan->meta().programs()->Get(0)->steps()->Get(2);
  ASSERT_EQ(linear.op(), fb::OpKind::Linear);
  EXPECT_EQ(linear.params_as_LinearParams()->weights(), fb::WeightFormat::Q4);
}

// The fused step of a biased int4 projection with its RMSNorm prologue:
// gamma, qweight, scales, zeros and a bias, five weights.
void makeNormLinearQ4WithBias(fb::PlanT &m) {
  for (auto &p : m.programs) {
    fb::StepT &s = *p->steps[2];
    s.weights = {1, 2, 3, 4, 1}; // tensor 1 ("norm", F32 [8]) as gamma and as the bias
    s.params = test::linearParams({.norm = true, .q4 = true, .groupSize = 32, .bias = true});
  }
}

TEST(Q4Plan, NormLinearQ4WithABiasLoads) {
  std::string path = writeQ4Plan("norm-bias");
  test::rewriteMetadata(path, makeNormLinearQ4WithBias);
  auto plan = Plan::open(path);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  const fb::Step *step = plan->meta().programs()->Get(0)->steps()->Get(2);
  EXPECT_EQ(ops::stepVariant(*step), "Linear[norm,q4,bias]");
  EXPECT_EQ(step->weights()->size(), 5u);
}

TEST(Q4Plan, NormLinearQ4BiasCorruptionsAreNamed) {
  expectContains(corrupt("norm-bias-shape",
                         [](fb::PlanT &m) {
                           makeNormLinearQ4WithBias(m);
                           for (auto &p : m.programs)
                             p->steps[2]->weights[4] = 3;
                         }),
                 "step 2: Linear: bias 'proj.scales' must be F32 [8], got F16 [8, 1]");
  expectContains(corrupt("norm-six-weights",
                         [](fb::PlanT &m) {
                           makeNormLinearQ4WithBias(m);
                           for (auto &p : m.programs)
                             p->steps[2]->weights.push_back(1);
                         }),
                 "Linear has 1 inputs and 6 weights; its LinearParams ask for 1 and 5");
}

TEST(Q4Plan, CorruptionsAreNamed) {
  // A group count that does not match K and G (shape and size kept consistent).
  expectContains(corrupt("groups",
                         [](fb::PlanT &m) {
                           m.tensors[3]->shape = {kHidden, 2};
                           m.tensors[3]->size = kHidden * 2 * 2;
                         }),
                 "step 2: Linear: tensor 'proj.scales' (scales) must be F16 [8, 1] for K = 8 "
                 "in groups of 32 (1 groups), got F16 [8, 2]");
  expectContains(corrupt("group-size",
                         [](fb::PlanT &m) {
                           for (auto &p : m.programs)
                             p->steps[2]->params.AsLinearParams()->group_size = 48;
                         }),
                 "Linear: LinearParams.group_size = 48: must be a positive multiple of 32");
  expectContains(
      corrupt("qweight-dtype", [](fb::PlanT &m) { m.tensors[2]->dtype = fb::DType::F32; }),
      "tensor 'proj.qweight' (packed int4 words) must be I32 [8, 4]");
  expectContains(corrupt("words",
                         [](fb::PlanT &m) {
                           m.tensors[2]->shape = {kHidden, 2};
                           m.tensors[2]->size = kHidden * 2 * 4;
                         }),
                 "got I32 [8, 2]");
  expectContains(corrupt("no-zeros",
                         [](fb::PlanT &m) {
                           for (auto &p : m.programs)
                             p->steps[2]->weights = {2, 3};
                         }),
                 "Linear has 1 inputs and 2 weights; its LinearParams ask for 1 and 3");
  expectContains(corrupt("bias",
                         [](fb::PlanT &m) {
                           for (auto &p : m.programs) {
                             p->steps[2]->weights = {2, 3, 4, 3};
                             p->steps[2]->params.AsLinearParams()->bias = true;
                           }
                         }),
                 "bias 'proj.scales' must be F32 [8], got F16 [8, 1]");
  expectContains(corrupt("dense-group",
                         [](fb::PlanT &m) {
                           for (auto &p : m.programs)
                             p->steps[2]->params.AsLinearParams()->weights =
                                 fb::WeightFormat::Dense;
                         }),
                 "LinearParams.group_size = 32: must be 0 for Dense weights");
}

// The CPU backend's load of the plan at `path`: its error, or "" when it loads.
std::string cpuLoadError(const std::string &path) {
  auto plan = Plan::open(path);
  EXPECT_TRUE(plan.isOk()) << plan.message();
  if (!plan)
    return "no plan";
  EngineOptions options;
  options.threads = 1;
  options.kvCacheTokens = 8;
  auto backend = CpuBackend::create(*plan, options);
  return backend.isOk() ? "" : backend.message();
}

// The CPU backend packs the zero points to nibbles (cpu/matmul_q4.h), so a
// stored zero must be what q4_layout.h says: an integer 0..15. The plan
// passes Plan::open (values are not metadata); the load names the tensor
// and the cell.
TEST(Q4Plan, ZeroPointsThatAreNotIntegers0To15FailTheCpuLoad) {
  EXPECT_EQ(cpuLoadError(writeQ4Plan("zeros-ok")), "");
  const struct {
    const char *name;
    float value;
    const char *holds;
  } bad[] = {{"fraction", 7.5f, "holds 7.5"},
             {"sixteen", 16.0f, "holds 16"},
             {"negative", -1.0f, "holds -1"},
             {"nan", std::nanf(""), "holds nan"}};
  for (const auto &b : bad) {
    const std::string path = writeQ4Plan(std::string("zeros-") + b.name,
                                         [&](Q4Plan &p) { p.zeros[3] = hd::f32ToF16(b.value); });
    const std::string message = cpuLoadError(path);
    expectContains(message, path);
    expectContains(message, "'proj.zeros': row 3, group 0 " + std::string(b.holds));
    expectContains(message, "must be integers 0 .. 15");
  }
}

// A tensor read as zero points and as anything else cannot be packed for one
// without breaking the other: the load refuses it.
TEST(Q4Plan, ZerosTensorSharedWithAnotherOperandFailsTheCpuLoad) {
  const std::string path = writeQ4Plan("zeros-shared", [](Q4Plan &p) {
    for (auto &program : p.tiny.contents.meta.programs)
      program->steps[2]->weights = {2, 3, 3}; // the scales as the zeros too
  });
  expectContains(cpuLoadError(path),
                 "tensor 'proj.scales' is read both as int4 zero points and as another operand");
}

} // namespace
} // namespace llmc
