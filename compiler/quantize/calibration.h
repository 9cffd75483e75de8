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

} // namespace llmc::quant
