// Calibration one segment at a time (quantize/calibration.h,
// SegmentedCalibration; quantize/awq.h, calibrateAndQuantize) on the tiny
// Qwen2 of tests/data/hf (2 layers, GQA, q/k/v biases): where the model is
// cut, statistics equal to the whole-model calibration bit for bit, plans
// equal to quantizeGroups' on them, the sequential mode, and the memory
// bound: generated weights are resident one segment at a time.
#include "common/test_paths.h"
#include "tiny_qwen2.h"
#include "frontend/model_spec.h"
#include "frontend/weight_check.h"
#include "lower_to_plan.h"
#include "models/llama_graph.h"
#include "passes/Quantize.h"
#include "quantize/awq.h"
#include "quantize/calibration.h"
#include "quantize/calibration_model.h"

#include <mlir/Dialect/Func/IR/FuncOps.h>
#include <mlir/IR/MLIRContext.h>

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>

namespace llmc {
namespace {

// The tiny Qwen2's @forward and its weights: views of the safetensors, or
// (generated) the same values written on demand through addGenerated.
struct Tiny : test::TinyQwen2Graph {
  quant::WeightTable views, generated;
  uint64_t generatedBytes = 0;

  Tiny() {
    if (!module)
      return;
    for (const auto &[name, t] : weights->all()) {
      EXPECT_EQ(t.dtype, DType::F32) << name;
      views.addView(name, t.data, t.dtype, t.shape);
      const uint8_t *data = t.data;
      generated.addGenerated(name, t.shape, [data](float *values, uint64_t count) {
        std::memcpy(values, data, count * sizeof(float));
      });
      generatedBytes += t.byteSize;
    }
  }
};

std::vector<int32_t> calibrationIds(int64_t count) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(2, 511);
  std::vector<int32_t> ids(count);
  for (int32_t &v : ids)
    v = id(rng);
  return ids;
}

// Several windows, two of them sampled; the whole X^T X per group.
quant::CalibrationOptions smallCalibration() {
  quant::CalibrationOptions options;
  options.maxTokens = 150;
  options.window = 32;
  options.sampleRows = 24;
  options.sampleWindows = 2;
  options.gramBlock = INT64_MAX;
  options.meanSkipsFirstRow = true;
  return options;
}

std::vector<mlir::Value> noBlockOutputs(size_t groups) {
  return std::vector<mlir::Value>(groups);
}

std::string weightName(llm::LinearOp linear) {
  return linear.getWeight().getDefiningOp<llm::WeightOp>().getName().str();
}

// The bytes of a table entry.
std::vector<uint8_t> bytesOf(const quant::WeightTable &table, const std::string &name) {
  const quant::WeightEntry *e = table.find(name);
  if (e == nullptr)
    return {};
  const auto *data = static_cast<const uint8_t *>(e->data);
  return std::vector<uint8_t>(data, data + e->elements() * dtypeSize(e->dtype));
}

// The int4 parts of one group's linears.
std::vector<std::vector<uint8_t>> packedGroup(const quant::WeightTable &table,
                                              const LinearGroup &group) {
  std::vector<std::vector<uint8_t>> parts;
  for (llm::LinearOp linear : group.linears)
    for (Q4Part part : {Q4Part::Weight, Q4Part::Scales, Q4Part::Zeros}) {
      parts.push_back(bytesOf(table, q4TensorName(q4WeightName(weightName(linear)), part)));
      EXPECT_FALSE(parts.back().empty()) << weightName(linear);
    }
  return parts;
}

// The model is cut before each layer and between its attention and MLP
// halves: an embedding segment, then one per half layer holding its two
// groups (q/k/v and o_proj; gate/up and down_proj); the last one ends at
// the last down_proj, without the final norm and LM head.
TEST(StreamingCalibration, CutsTheModelIntoHalfLayers) {
  Tiny m;
  ASSERT_TRUE(m.module);
  ThreadPool pool(2);
  auto model = quant::CalibrationModel::create(m.forward(), m.views, pool, 64);
  ASSERT_TRUE(model.isOk()) << model.message();
  std::vector<LinearGroup> groups = findLinearGroups(m.forward());
  ASSERT_EQ(groups.size(), 8u);
  auto segments = quant::SegmentedCalibration::create(**model, groups, noBlockOutputs(8),
                                                      calibrationIds(150), 0,
                                                      smallCalibration(), pool);
  ASSERT_TRUE(segments.isOk()) << segments.message();
  ASSERT_EQ(segments->numSegments(), 5);
  EXPECT_TRUE(segments->groupsOf(0).empty());
  EXPECT_FALSE(segments->segment(0).input);
  for (int64_t i = 1; i < 5; ++i) {
    EXPECT_EQ(segments->groupsOf(i), (std::vector<size_t>{2 * size_t(i) - 2, 2 * size_t(i) - 1}));
    EXPECT_EQ(segments->segment(i).firstStep, segments->segment(i - 1).endStep);
    EXPECT_TRUE(segments->segment(i).input);
  }
  EXPECT_FALSE(segments->segment(4).output);
  EXPECT_EQ(segments->segment(4).endStep,
            (*model)->stepOf(groups[7].linears[0].getOperation()) + 1);
  EXPECT_LT(segments->segment(4).endStep, (*model)->numSteps());
  // Out of order is an error, not a wrong answer.
  auto skipped = segments->collect(2, true);
  EXPECT_FALSE(skipped.isOk());
}

// Segment by segment, every group's statistics (mean |x|, the sample and
// its sequences, the whole X^T X, the row count) equal calibrate()'s on the
// whole model, bit for bit.
TEST(StreamingCalibration, StatisticsEqualTheWholeModelRun) {
  Tiny m;
  ASSERT_TRUE(m.module);
  ThreadPool pool(2);
  auto model = quant::CalibrationModel::create(m.forward(), m.views, pool, 64);
  ASSERT_TRUE(model.isOk()) << model.message();
  std::vector<LinearGroup> groups = findLinearGroups(m.forward());
  const std::vector<int32_t> ids = calibrationIds(150);
  auto whole = quant::calibrate(**model, groups, ids, 0, smallCalibration(), pool);
  ASSERT_TRUE(whole.isOk()) << whole.message();
  auto segments = quant::SegmentedCalibration::create(**model, groups, noBlockOutputs(8), ids, 0,
                                                      smallCalibration(), pool);
  ASSERT_TRUE(segments.isOk()) << segments.message();
  size_t compared = 0;
  for (int64_t i = 0; i < segments->numSegments(); ++i) {
    auto stats = segments->collect(i, true);
    ASSERT_TRUE(stats.isOk()) << stats.message();
    ASSERT_EQ(stats->size(), segments->groupsOf(i).size());
    for (size_t k = 0; k < stats->size(); ++k) {
      const quant::GroupActivations &a = (*stats)[k], &b = (*whole)[segments->groupsOf(i)[k]];
      EXPECT_GT(a.totalRows, 0);
      EXPECT_EQ(a.totalRows, b.totalRows);
      EXPECT_EQ(a.meanAbs, b.meanAbs);
      EXPECT_EQ(a.sampleRows, b.sampleRows);
      EXPECT_EQ(a.sequences, b.sequences);
      EXPECT_EQ(a.sample, b.sample);
      EXPECT_EQ(a.gramBlock, b.gramBlock);
      EXPECT_EQ(a.gram, b.gram);
      ++compared;
    }
  }
  EXPECT_EQ(compared, groups.size());
}

struct Quantized {
  std::vector<quant::GroupReport> reports;
  std::unique_ptr<quant::WeightTable> out = std::make_unique<quant::WeightTable>();
};

Quantized streamed(Tiny &m, const quant::WeightTable &source, QuantizeMethod method,
                   bool sequential) {
  ThreadPool pool(2);
  Quantized q;
  auto model = quant::CalibrationModel::create(m.forward(), source, pool, 64);
  EXPECT_TRUE(model.isOk()) << model.message();
  if (!model.isOk())
    return q;
  quant::QuantizeSettings settings;
  settings.config.method = method;
  settings.config.groupSize = 32;
  settings.clip = method == QuantizeMethod::Awq;
  settings.normScales = true;
  settings.sequential = sequential;
  quant::CalibrationOptions calibration = smallCalibration();
  calibration.gramBlock = method == QuantizeMethod::Gptq ? INT64_MAX : 32;
  auto reports = quant::calibrateAndQuantize(findLinearGroups(m.forward()), **model,
                                             calibrationIds(150), 0, calibration, source,
                                             settings, pool, *q.out);
  EXPECT_TRUE(reports.isOk()) << reports.message();
  if (reports.isOk())
    q.reports = std::move(*reports);
  return q;
}

// Without the sequential mode the streamed AWQ and GPTQ plans are those of
// the whole-model calibration (quantizeGroups on calibrate()'s statistics):
// the same int4 parts, the same AWQ-scaled norms, the same errors.
TEST(StreamingCalibration, PlansEqualTheWholeModelCalibration) {
  Tiny m;
  ASSERT_TRUE(m.module);
  std::vector<LinearGroup> groups = findLinearGroups(m.forward());
  for (QuantizeMethod method : {QuantizeMethod::Awq, QuantizeMethod::Gptq}) {
    ThreadPool pool(2);
    auto model = quant::CalibrationModel::create(m.forward(), m.views, pool, 64);
    ASSERT_TRUE(model.isOk()) << model.message();
    quant::CalibrationOptions calibration = smallCalibration();
    calibration.gramBlock = method == QuantizeMethod::Gptq ? INT64_MAX : 32;
    auto stats = quant::calibrate(**model, groups, calibrationIds(150), 0, calibration, pool);
    ASSERT_TRUE(stats.isOk()) << stats.message();
    quant::QuantizeSettings settings;
    settings.config.method = method;
    settings.config.groupSize = 32;
    settings.clip = method == QuantizeMethod::Awq;
    settings.normScales = true;
    quant::WeightTable whole;
    auto reports =
        quant::quantizeGroups(groups, &*stats, model->get(), m.views, settings, pool, whole);
    ASSERT_TRUE(reports.isOk()) << reports.message();
    Quantized s = streamed(m, m.views, method, false);
    ASSERT_EQ(s.reports.size(), reports->size());
    for (size_t g = 0; g < groups.size(); ++g) {
      EXPECT_EQ(packedGroup(*s.out, groups[g]), packedGroup(whole, groups[g])) << g;
      EXPECT_EQ(s.reports[g].outputError, (*reports)[g].outputError) << g;
      EXPECT_EQ(s.reports[g].alpha, (*reports)[g].alpha) << g;
    }
    if (method == QuantizeMethod::Awq) {
      const std::string norm = "model.layers.1.post_attention_layernorm.weight";
      EXPECT_FALSE(bytesOf(*s.out, awqScaledName(norm)).empty());
      EXPECT_EQ(bytesOf(*s.out, awqScaledName(norm)), bytesOf(whole, awqScaledName(norm)));
    }
  }
}

// The sequential mode calibrates layer 1 on the outputs of the quantized
// layer 0: layer 0's groups come out as without it (same inputs), layer
// 1's are calibrated on other rows, so their RTN error on the sample and
// their packing differ.
TEST(StreamingCalibration, SequentialModeCalibratesOnTheQuantizedLayers) {
  Tiny m;
  ASSERT_TRUE(m.module);
  std::vector<LinearGroup> groups = findLinearGroups(m.forward());
  for (QuantizeMethod method : {QuantizeMethod::Awq, QuantizeMethod::Gptq}) {
    Quantized plain = streamed(m, m.views, method, false);
    Quantized sequential = streamed(m, m.views, method, true);
    ASSERT_EQ(plain.reports.size(), 8u);
    ASSERT_EQ(sequential.reports.size(), 8u);
    // Layer 0's attention half reads the embedding: the same in both.
    for (size_t g = 0; g < 2; ++g) {
      EXPECT_EQ(packedGroup(*sequential.out, groups[g]), packedGroup(*plain.out, groups[g]));
      EXPECT_EQ(sequential.reports[g].rtnOutputError, plain.reports[g].rtnOutputError);
    }
    // Layer 1 reads what the int4 layer 0 computes.
    for (size_t g = 4; g < 8; ++g) {
      EXPECT_NE(sequential.reports[g].rtnOutputError, plain.reports[g].rtnOutputError) << g;
      EXPECT_GT(sequential.reports[g].outputNorm, 0.0) << g;
    }
    EXPECT_NE(packedGroup(*sequential.out, groups[7]), packedGroup(*plain.out, groups[7]));
  }
}

// With weights generated on demand, calibration keeps at most one
// segment's weights resident (each segment's are released before the next
// is acquired), gives them all back at the end, and builds the same plan
// as from the checkpoint's views.
TEST(StreamingCalibration, HoldsOneSegmentsWeightsAtATime) {
  Tiny m;
  ASSERT_TRUE(m.module);
  ThreadPool pool(2);
  auto model = quant::CalibrationModel::create(m.forward(), m.generated, pool, 64);
  ASSERT_TRUE(model.isOk()) << model.message();
  EXPECT_EQ(m.generated.generatedResidentBytes(), 0u); // lowering reads no values
  std::vector<LinearGroup> groups = findLinearGroups(m.forward());
  auto segments = quant::SegmentedCalibration::create(**model, groups, noBlockOutputs(8),
                                                      calibrationIds(150), 0,
                                                      smallCalibration(), pool);
  ASSERT_TRUE(segments.isOk()) << segments.message();
  uint64_t largestSegment = 0;
  for (int64_t i = 0; i < segments->numSegments(); ++i) {
    uint64_t bytes = 0;
    for (const std::string &name : (*model)->weightsOf(segments->segment(i)))
      bytes += m.generated.peek(name)->elements() * sizeof(float);
    largestSegment = std::max(largestSegment, bytes);
  }
  ASSERT_GT(largestSegment, 0u);
  for (QuantizeMethod method : {QuantizeMethod::Awq, QuantizeMethod::Gptq}) {
    Quantized fromGenerated = streamed(m, m.generated, method, false);
    EXPECT_LE(m.generated.peakGeneratedResidentBytes(), largestSegment);
    EXPECT_LT(m.generated.peakGeneratedResidentBytes(), m.generatedBytes / 2);
    EXPECT_EQ(m.generated.generatedResidentBytes(), 0u);
    Quantized fromViews = streamed(m, m.views, method, false);
    for (size_t g = 0; g < groups.size(); ++g)
      EXPECT_EQ(packedGroup(*fromGenerated.out, groups[g]), packedGroup(*fromViews.out, groups[g]));
  }
}

// RTN (no calibration model) releases each group's float weights once it
// is packed: at most the largest group's are resident at a time, none at
// the end, and the int4 parts are those from the checkpoint's views.
TEST(StreamingCalibration, RtnHoldsOneGroupsWeightsAtATime) {
  Tiny m;
  ASSERT_TRUE(m.module);
  ThreadPool pool(2);
  std::vector<LinearGroup> groups = findLinearGroups(m.forward());
  quant::QuantizeSettings settings;
  settings.config.method = QuantizeMethod::Rtn;
  settings.config.groupSize = 32;
  quant::WeightTable fromGenerated, fromViews;
  auto a = quant::quantizeGroups(groups, nullptr, nullptr, m.generated, settings, pool,
                                 fromGenerated);
  ASSERT_TRUE(a.isOk()) << a.message();
  auto b = quant::quantizeGroups(groups, nullptr, nullptr, m.views, settings, pool, fromViews);
  ASSERT_TRUE(b.isOk()) << b.message();
  uint64_t largestGroup = 0;
  for (const LinearGroup &group : groups) {
    uint64_t bytes = 0;
    for (llm::LinearOp linear : group.linears)
      bytes += m.generated.peek(weightName(linear))->elements() * sizeof(float);
    largestGroup = std::max(largestGroup, bytes);
  }
  EXPECT_LE(m.generated.peakGeneratedResidentBytes(), largestGroup);
  EXPECT_EQ(m.generated.generatedResidentBytes(), 0u);
  for (const LinearGroup &group : groups)
    EXPECT_EQ(packedGroup(fromGenerated, group), packedGroup(fromViews, group));
}

// A generated tensor: reserved, written on first read or acquire, dropped
// by release, written again (the same values) on the next read.
TEST(StreamingCalibration, GeneratedWeightsAreWrittenOnDemand) {
  quant::WeightTable table;
  int fills = 0;
  table.addGenerated("w", {4, 1024}, [&fills](float *values, uint64_t count) {
    ++fills;
    for (uint64_t i = 0; i < count; ++i)
      values[i] = static_cast<float>(i);
  });
  EXPECT_EQ(table.generatedResidentBytes(), 0u);
  ASSERT_NE(table.peek("w"), nullptr);
  EXPECT_EQ(fills, 0);
  auto values = table.toF32("w");
  ASSERT_TRUE(values.isOk());
  EXPECT_EQ(fills, 1);
  EXPECT_EQ((*values)[4095], 4095.0f);
  EXPECT_EQ(table.generatedResidentBytes(), 4u * 4096);
  table.acquire({"w", "unknown"});
  EXPECT_EQ(fills, 1);
  table.release({"w"});
  EXPECT_EQ(table.generatedResidentBytes(), 0u);
  EXPECT_EQ(table.peakGeneratedResidentBytes(), 4u * 4096);
  const float *data = static_cast<const float *>(table.find("w")->data);
  EXPECT_EQ(fills, 2);
  EXPECT_EQ(data[4095], 4095.0f);
  table.addOwned("w", std::vector<float>{1.0f}, {1}); // replaces it
  EXPECT_EQ(table.generatedResidentBytes(), 0u);
  EXPECT_EQ(table.find("w")->elements(), 1u);
}

} // namespace
} // namespace llmc
