#include "quantize/calibration.h"

#include "cpu/matmul.h"
#include "ir/LlmOps.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/STLExtras.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace llmc::quant {
namespace {

// The windows the ids are fed in, BOS included.
std::vector<std::vector<int32_t>> makeWindows(const std::vector<int32_t> &ids,
                                              std::optional<int32_t> bos, int64_t maxTokens,
                                              int64_t window) {
  const int64_t used = std::min<int64_t>(static_cast<int64_t>(ids.size()), maxTokens);
  const int64_t perWindow = bos ? window - 1 : window;
  std::vector<std::vector<int32_t>> windows;
  for (int64_t begin = 0; begin < used; begin += perWindow) {
    int64_t end = std::min(used, begin + perWindow);
    std::vector<int32_t> w;
    if (bos)
      w.push_back(*bos);
    w.insert(w.end(), ids.begin() + begin, ids.begin() + end);
    windows.push_back(std::move(w));
  }
  return windows;
}

// Accumulates |x| sums over all rows, and keeps the first rows of every
// stride-th window as the sample.
class Collector {
public:
  Collector(const std::vector<LinearGroup> &groups, int64_t windows,
            const CalibrationOptions &options, ThreadPool &pool)
      : pool_(pool), skipFirstRow_(options.meanSkipsFirstRow) {
    const int64_t sampled = std::max<int64_t>(1, std::min(windows, options.sampleWindows));
    stride_ = windows / sampled;
    lastSampled_ = stride_ * (sampled - 1);
    prefix_ = std::max<int64_t>(1, options.sampleRows / sampled);
    stats_.resize(groups.size());
    windowRows_.assign(groups.size(), 0);
    skippedRows_.assign(groups.size(), 0);
    for (size_t g = 0; g < groups.size(); ++g) {
      index_[groups[g].input] = g;
      GroupActivations &stats = stats_[g];
      stats.cols = groups[g].cols;
      absSums_.emplace_back(groups[g].cols, 0.0);
      if (options.gramBlock > 0) {
        stats.gramBlock = std::min(options.gramBlock, stats.cols);
        stats.gram.assign(gramSize(stats), 0.0f);
      }
    }
  }

  void observe(mlir::Value value, const float *data, int64_t rows, int64_t width) {
    auto it = index_.find(value);
    if (it == index_.end())
      return;
    std::vector<double> &sums = absSums_[it->second];
    // Rows may come in several calls per window: only the window's row 0 is left out.
    int64_t &seen = windowRows_[it->second];
    for (int64_t r = skipFirstRow_ && seen == 0 ? 1 : 0; r < rows; ++r)
      for (int64_t c = 0; c < width; ++c)
        sums[c] += std::fabs(data[r * width + c]);
    if (skipFirstRow_ && seen == 0 && rows > 0)
      ++skippedRows_[it->second];
    seen += rows;
    GroupActivations &stats = stats_[it->second];
    stats.totalRows += rows;
    if (stats.gramBlock > 0)
      accumulateGram(stats, data, rows);
    if (window_ % stride_ != 0 || window_ > lastSampled_)
      return;
    int64_t kept = std::min(rows, prefix_);
    stats.sample.insert(stats.sample.end(), data, data + kept * width);
    stats.sampleRows += kept;
    stats.sequences.push_back(kept);
  }

  void nextWindow(int64_t rows) {
    totalRows_ += rows;
    ++window_;
    std::fill(windowRows_.begin(), windowRows_.end(), 0);
  }

  std::vector<GroupActivations> finish() {
    for (size_t g = 0; g < stats_.size(); ++g) {
      stats_[g].meanAbs = std::move(absSums_[g]);
      const int64_t rows = std::max<int64_t>(1, totalRows_ - skippedRows_[g]);
      for (double &m : stats_[g].meanAbs)
        m /= static_cast<double>(rows);
    }
    return std::move(stats_);
  }

private:
  static int64_t gramSize(const GroupActivations &s) {
    int64_t size = 0;
    for (int64_t b = 0; b < s.cols; b += s.gramBlock) {
      const int64_t n = std::min(s.gramBlock, s.cols - b);
      size += n * n;
    }
    return size;
  }

  // gram += X^T X per diagonal block, X [rows, cols]: the block's columns
  // transposed [n, rows] times themselves, on the CPU matmul (f32).
  void accumulateGram(GroupActivations &s, const float *x, int64_t rows) {
    transposed_.resize(s.cols * rows);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < s.cols; ++c)
        transposed_[c * rows + r] = x[r * s.cols + c];
    float *out = s.gram.data();
    for (int64_t b = 0; b < s.cols; b += s.gramBlock) {
      const int64_t n = std::min(s.gramBlock, s.cols - b);
      const float *xt = transposed_.data() + b * rows;
      cpu::matmul(pool_, xt, n, {xt, DType::F32, n, rows}, nullptr, 1.0f, out);
      out += n * n;
    }
  }

  ThreadPool &pool_;
  std::vector<float> transposed_;
  llvm::DenseMap<mlir::Value, size_t> index_;
  std::vector<GroupActivations> stats_;
  std::vector<std::vector<double>> absSums_;
  int64_t totalRows_ = 0, window_ = 0;
  bool skipFirstRow_ = false;
  std::vector<int64_t> windowRows_;  // per group: rows of the current window seen
  std::vector<int64_t> skippedRows_; // per group: first rows left out of the mean |x|
  int64_t stride_ = 1, lastSampled_ = 0, prefix_ = 1;
};

} // namespace

Expected<std::vector<GroupActivations>>
calibrate(CalibrationModel &model, const std::vector<LinearGroup> &groups,
          const std::vector<int32_t> &ids, std::optional<int32_t> bos,
          const CalibrationOptions &options, ThreadPool &pool, const Progress &progress) {
  if (ids.size() < 2)
    return Status::error("the calibration text has " + std::to_string(ids.size()) +
                         " tokens; AWQ needs at least 2 (a few thousand is typical)");
  std::vector<std::vector<int32_t>> windows =
      makeWindows(ids, bos, options.maxTokens, options.window);
  int64_t totalRows = 0;
  for (const auto &w : windows)
    totalRows += static_cast<int64_t>(w.size());
  Collector collector(groups, static_cast<int64_t>(windows.size()), options, pool);
  std::vector<mlir::Value> inputs;
  for (const LinearGroup &group : groups)
    inputs.push_back(group.input);
  int64_t done = 0;
  for (const auto &w : windows) {
    if (progress)
      progress("calibrating", done, totalRows);
    // Up to the last group's input: the LM head computes nothing calibration reads.
    LLMC_RETURN_IF_ERROR(model.observe(w, inputs,
                                       [&](mlir::Value v, const float *data, int64_t rows,
                                           int64_t width) {
                                         collector.observe(v, data, rows, width);
                                       }));
    collector.nextWindow(static_cast<int64_t>(w.size()));
    done += static_cast<int64_t>(w.size());
  }
  if (progress)
    progress("calibrating", totalRows, totalRows);
  return collector.finish();
}

Expected<SegmentedCalibration>
SegmentedCalibration::create(CalibrationModel &model, const std::vector<LinearGroup> &groups,
                             const std::vector<mlir::Value> &blockOutputs,
                             const std::vector<int32_t> &ids, std::optional<int32_t> bos,
                             const CalibrationOptions &options, ThreadPool &pool) {
  if (ids.size() < 2)
    return Status::error("the calibration text has " + std::to_string(ids.size()) +
                         " tokens; AWQ needs at least 2 (a few thousand is typical)");
  SegmentedCalibration c(model, groups, options, pool);
  c.windows_ = makeWindows(ids, bos, options.maxTokens, options.window);
  for (const auto &w : c.windows_)
    c.totalRows_ += static_cast<int64_t>(w.size());
  c.rows_.resize(c.windows_.size());
  LLMC_ASSIGN_OR_RETURN(Plan cuts, plan(model, groups, blockOutputs));
  c.segments_ = std::move(cuts.segments);
  c.groupsOf_ = std::move(cuts.groupsOf);
  return c;
}

Expected<SegmentedCalibration::Plan>
SegmentedCalibration::plan(const CalibrationModel &model, const std::vector<LinearGroup> &groups,
                           const std::vector<mlir::Value> &blockOutputs) {
  if (blockOutputs.size() != groups.size())
    return Status::error("internal: " + std::to_string(blockOutputs.size()) +
                         " block outputs for " + std::to_string(groups.size()) + " groups");
  Plan c;
  // Each group's steps [lo, hi]: its input's producer (or sink) .. its last
  // linear or block output. No cut may fall inside one.
  auto stepOfValue = [&](mlir::Value v) {
    mlir::Operation *op = v ? v.getDefiningOp() : nullptr;
    return op == nullptr ? int64_t{-1} : model.stepOf(op);
  };
  std::vector<std::pair<int64_t, int64_t>> spans;
  int64_t last = -1;
  for (size_t g = 0; g < groups.size(); ++g) {
    int64_t lo = stepOfValue(groups[g].input), hi = lo;
    if (groups[g].sinkOp != nullptr)
      lo = std::min(lo, model.stepOf(groups[g].sinkOp));
    for (llm::LinearOp linear : groups[g].linears)
      hi = std::max(hi, model.stepOf(linear.getOperation()));
    hi = std::max(hi, stepOfValue(blockOutputs[g]));
    if (lo < 0)
      return Status::error("internal: group " + groups[g].label() + " outside the program");
    spans.push_back({lo, hi});
    last = std::max(last, hi);
  }
  if (groups.empty())
    return c;
  std::vector<CalibrationModel::Cut> cuts;
  for (const CalibrationModel::Cut &cut : model.cuts()) {
    if (cut.step > last)
      break;
    if (llvm::none_of(spans, [&](const auto &span) {
          return span.first < cut.step && cut.step <= span.second;
        }))
      cuts.push_back(cut);
  }
  for (size_t k = 0; k <= cuts.size(); ++k) {
    CalibrationModel::Segment segment;
    segment.firstStep = k == 0 ? 0 : cuts[k - 1].step;
    segment.endStep = k == cuts.size() ? last + 1 : cuts[k].step;
    if (k > 0)
      segment.input = cuts[k - 1].value;
    if (k < cuts.size())
      segment.output = cuts[k].value;
    c.segments.push_back(segment);
    c.groupsOf.emplace_back();
    for (size_t g = 0; g < groups.size(); ++g)
      if (segment.firstStep <= spans[g].first && spans[g].second < segment.endStep)
        c.groupsOf.back().push_back(g);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    int64_t homes = 0;
    for (const auto &members : c.groupsOf)
      homes += std::count(members.begin(), members.end(), g);
    if (homes != 1)
      return Status::error("internal: group " + groups[g].label() + " falls in " +
                           std::to_string(homes) + " calibration segments");
  }
  return c;
}

Status SegmentedCalibration::runWindows(int64_t i, const std::vector<mlir::Value> &observed,
                                        const CalibrationModel::Observer &observe,
                                        const std::function<void(int64_t)> &windowDone,
                                        bool keepOutputs,
                                        const CalibrationModel::WeightOverrides &overrides,
                                        const Progress &progress) {
  if (i != next_ || i >= numSegments())
    return Status::error("internal: calibration segment " + std::to_string(i) + " out of order");
  const CalibrationModel::Segment &segment = segments_[i];
  int64_t done = 0;
  for (size_t w = 0; w < windows_.size(); ++w) {
    if (progress)
      progress("calibrating", done, totalRows_);
    LLMC_ASSIGN_OR_RETURN(std::vector<float> out,
                          model_->runSegment(segment, windows_[w],
                                             segment.input ? rows_[w].data() : nullptr, observed,
                                             observe, overrides));
    if (keepOutputs)
      rows_[w] = std::move(out);
    if (windowDone)
      windowDone(static_cast<int64_t>(windows_[w].size()));
    done += static_cast<int64_t>(windows_[w].size());
  }
  if (progress)
    progress("calibrating", totalRows_, totalRows_);
  if (keepOutputs)
    ++next_;
  return Status::ok();
}

Expected<std::vector<GroupActivations>>
SegmentedCalibration::collect(int64_t i, bool advance, const Progress &progress) {
  std::vector<LinearGroup> groups;
  std::vector<mlir::Value> inputs;
  for (size_t g : groupsOf(i)) {
    groups.push_back((*groups_)[g]);
    inputs.push_back((*groups_)[g].input);
  }
  Collector collector(groups, static_cast<int64_t>(windows_.size()), options_, *pool_);
  LLMC_RETURN_IF_ERROR(runWindows(
      i, inputs,
      [&](mlir::Value v, const float *data, int64_t rows, int64_t width) {
        collector.observe(v, data, rows, width);
      },
      [&](int64_t rows) { collector.nextWindow(rows); }, advance, {}, progress));
  return collector.finish();
}

Status SegmentedCalibration::advance(int64_t i,
                                     const CalibrationModel::WeightOverrides &overrides,
                                     const Progress &progress) {
  return runWindows(i, {}, nullptr, nullptr, true, overrides, progress);
}

} // namespace llmc::quant
