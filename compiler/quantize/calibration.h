// Calibration for AWQ and GPTQ: runs the unquantized model (CalibrationModel) over
// windows of a calibration text and records, for every group of linears
// that share an input (passes/Quantize.h), the per-input-channel mean |x|
// over all tokens and a strided sample of input rows for the searches.
#pragma once

#include "passes/Quantize.h"
#include "quantize/calibration_model.h"
#include "support/thread_pool.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace llmc::quant {

// (what, done, total): called as work advances; the CLI draws a bar and an ETA.
using Progress = std::function<void(const std::string &task, uint64_t done, uint64_t total)>;

struct GroupActivations {
  std::vector<double> meanAbs; // [K] mean |x| per input channel (CalibrationOptions::meanSkipsFirstRow)
  // Sampled input rows [sampleRows, K]: the first rows of a few windows
  // spread over the text, so that they form whole sequences (a causal
  // window's prefix is one) for the attention of a block output.
  std::vector<float> sample;
  int64_t sampleRows = 0;
  std::vector<int64_t> sequences; // lengths of the sampled sequences, in order
  int64_t cols = 0;
  // X^T X over every calibration row X [rows, K] (CalibrationOptions::gram):
  // the whole [K, K] (GPTQ's Hessian, up to a factor), or only its diagonal
  // blocks [ceil(K / B)][b, b] (b = B, the last one ragged; AWQ's clipping).
  std::vector<float> gram;
  int64_t gramBlock = 0; // 0: none; >= cols: the whole matrix; else B
  int64_t totalRows = 0; // rows the mean |x| and gram are over
};

struct CalibrationOptions {
  int64_t maxTokens = 8192;  // calibration ids used (before BOS is added per window)
  int64_t window = 512;      // rows per forward pass, BOS included
  int64_t sampleRows = 512;  // rows kept per group for the searches
  int64_t sampleWindows = 4; // ... taken as prefixes of this many windows
  // Which part of X^T X to accumulate per group (GroupActivations::gram):
  // 0 none, >= K the whole matrix (K^2 floats per group), else the
  // diagonal blocks of this size (K * B floats).
  int64_t gramBlock = 0;
  // Leave each window's first row (the BOS every window starts with) out of
  // the mean |x|: its activations are the same outliers in every window
  // (about 1 row in 500 of them, yet they shift the means AWQ's scales come
  // from; the reference's calibration blocks rarely start with BOS). The
  // sample and the gram keep it.
  bool meanSkipsFirstRow = false;
};

// Feeds `ids` (the text without BOS, cut to maxTokens) as windows of
// [BOS] + window - 1 ids (without BOS when bos is empty), each a fresh
// sequence. Fails when there are fewer than 2 ids.
Expected<std::vector<GroupActivations>>
calibrate(CalibrationModel &model, const std::vector<LinearGroup> &groups,
          const std::vector<int32_t> &ids, std::optional<int32_t> bos,
          const CalibrationOptions &options, ThreadPool &pool,
          const Progress &progress = nullptr);

// Calibration one stretch of the model at a time (docs/quantization.md,
// "Streaming calibration"): the model is cut where one value alone carries
// the state (CalibrationModel::cuts: the residual stream between decoder
// layers and between a layer's attention and MLP halves), never inside a
// group's work (its input's producer, its linears and `blockOutputs[g]`, the
// value its error is measured on; empty: none). The rows of every window at
// the current cut, [rows, hidden] f32 in all, are all that is kept between
// segments: collect(i) runs segment i over them and returns the statistics
// of its groups, advance(i) runs it again (with other weights, e.g. the
// quantized ones: GPTQ's sequential mode) to give the next segment its rows.
// collect(i, true) does both in one pass with the model's own weights. The
// statistics equal calibrate()'s (same rows, in the same order).
class SegmentedCalibration {
public:
  static Expected<SegmentedCalibration>
  create(CalibrationModel &model, const std::vector<LinearGroup> &groups,
         const std::vector<mlir::Value> &blockOutputs, const std::vector<int32_t> &ids,
         std::optional<int32_t> bos, const CalibrationOptions &options, ThreadPool &pool);

  // Where create() cuts the model: the segments and the groups of each.
  struct Plan {
    std::vector<CalibrationModel::Segment> segments;
    std::vector<std::vector<size_t>> groupsOf;
  };
  static Expected<Plan> plan(const CalibrationModel &model, const std::vector<LinearGroup> &groups,
                             const std::vector<mlir::Value> &blockOutputs);

  int64_t numSegments() const { return static_cast<int64_t>(segments_.size()); }
  const CalibrationModel::Segment &segment(int64_t i) const { return segments_[i]; }
  // The groups (indices into `groups`) whose work lies in segment i, in order.
  const std::vector<size_t> &groupsOf(int64_t i) const { return groupsOf_[i]; }
  int64_t totalRows() const { return totalRows_; }

  // The statistics of segment i's groups, one per entry of groupsOf(i);
  // with `advance` the segment's outputs also become segment i + 1's rows.
  // Segments go in order: i must be the next one.
  Expected<std::vector<GroupActivations>> collect(int64_t i, bool advance,
                                                  const Progress &progress = nullptr);
  // Runs segment i (already collected without advancing) with `overrides`
  // and keeps its outputs as segment i + 1's rows.
  Status advance(int64_t i, const CalibrationModel::WeightOverrides &overrides,
                 const Progress &progress = nullptr);

private:
  SegmentedCalibration(CalibrationModel &model, const std::vector<LinearGroup> &groups,
                       const CalibrationOptions &options, ThreadPool &pool)
      : model_(&model), groups_(&groups), options_(options), pool_(&pool) {}
  Status runWindows(int64_t i, const std::vector<mlir::Value> &observed,
                    const CalibrationModel::Observer &observe,
                    const std::function<void(int64_t rows)> &windowDone, bool keepOutputs,
                    const CalibrationModel::WeightOverrides &overrides, const Progress &progress);

  CalibrationModel *model_;
  const std::vector<LinearGroup> *groups_;
  CalibrationOptions options_;
  ThreadPool *pool_;
  std::vector<std::vector<int32_t>> windows_;
  std::vector<std::vector<float>> rows_; // per window: [T, width] at the current cut
  std::vector<CalibrationModel::Segment> segments_;
  std::vector<std::vector<size_t>> groupsOf_;
  int64_t totalRows_ = 0;
  int64_t next_ = 0; // the segment whose rows rows_ holds
};

} // namespace llmc::quant
