#include "quantize/calibration.h"

#include <llvm/ADT/DenseMap.h>

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
            const CalibrationOptions &options) {
    const int64_t sampled = std::max<int64_t>(1, std::min(windows, options.sampleWindows));
    stride_ = windows / sampled;
    lastSampled_ = stride_ * (sampled - 1);
    prefix_ = std::max<int64_t>(1, options.sampleRows / sampled);
    stats_.resize(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) {
      index_[groups[g].input] = g;
      stats_[g].cols = groups[g].cols;
      absSums_.emplace_back(groups[g].cols, 0.0);
    }
  }

  void observe(mlir::Value value, const float *data, int64_t rows, int64_t width) {
    auto it = index_.find(value);
    if (it == index_.end())
      return;
    std::vector<double> &sums = absSums_[it->second];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < width; ++c)
        sums[c] += std::fabs(data[r * width + c]);
    if (window_ % stride_ != 0 || window_ > lastSampled_)
      return;
    GroupActivations &stats = stats_[it->second];
    int64_t kept = std::min(rows, prefix_);
    stats.sample.insert(stats.sample.end(), data, data + kept * width);
    stats.sampleRows += kept;
    stats.sequences.push_back(kept);
  }

  void nextWindow(int64_t rows) {
    totalRows_ += rows;
    ++window_;
  }

  std::vector<GroupActivations> finish() {
    for (size_t g = 0; g < stats_.size(); ++g) {
      stats_[g].meanAbs = std::move(absSums_[g]);
      for (double &m : stats_[g].meanAbs)
        m /= static_cast<double>(totalRows_);
    }
    return std::move(stats_);
  }

private:
  llvm::DenseMap<mlir::Value, size_t> index_;
  std::vector<GroupActivations> stats_;
  std::vector<std::vector<double>> absSums_;
  int64_t totalRows_ = 0, window_ = 0;
  int64_t stride_ = 1, lastSampled_ = 0, prefix_ = 1;
};

} // namespace

Expected<std::vector<GroupActivations>>
calibrate(ForwardInterpreter &model, const std::vector<LinearGroup> &groups,
          const std::vector<int32_t> &ids, std::optional<int32_t> bos,
          const CalibrationOptions &options, const Progress &progress) {
  if (ids.size() < 2)
    return Status::error("the calibration text has " + std::to_string(ids.size()) +
                         " tokens; AWQ needs at least 2 (a few thousand is typical)");
  std::vector<std::vector<int32_t>> windows =
      makeWindows(ids, bos, options.maxTokens, options.window);
  int64_t totalRows = 0;
  for (const auto &w : windows)
    totalRows += static_cast<int64_t>(w.size());
  Collector collector(groups, static_cast<int64_t>(windows.size()), options);
  int64_t done = 0;
  for (const auto &w : windows) {
    if (progress)
      progress("calibrating", done, totalRows);
    LLMC_RETURN_IF_ERROR(
        model
            .run(w, [&](mlir::Value v, const float *data, int64_t rows,
                        int64_t width) { collector.observe(v, data, rows, width); })
            .status());
    collector.nextWindow(static_cast<int64_t>(w.size()));
    done += static_cast<int64_t>(w.size());
  }
  if (progress)
    progress("calibrating", totalRows, totalRows);
  return collector.finish();
}

} // namespace llmc::quant
