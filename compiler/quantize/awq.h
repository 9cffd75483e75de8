// AWQ (Lin et al., "AWQ: Activation-aware Weight Quantization", MLSys 2024)
// and round-to-nearest, on the groups of linears of passes/Quantize.h.
//
// Per group with calibration data (by default only the groups whose scales
// fold into a linear, QuantizeSettings::normScales): for alpha = i / grid (i < grid),
//   s = max(meanAbs(x)^alpha, 1e-4), s /= sqrt(max(s) * min(s)),
// quantize W * diag(s) group-wise, and measure the group's output error
// || X W^T - X (Q(W s) / s)^T ||^2 on the sampled input rows X; keep the
// best alpha (alpha = 0 is RTN, so AWQ never does worse on X; the output is
// the group's block output where there is one, see quantizeGroups). The scales
// then fold into the group's sink (rms_norm weight, or the rows and bias of
// the producing linear), and with clipping each (row, group) of the scaled
// weights may be clamped to [lo (1 - a / 40), hi (1 - b / 40)] (a, b < 20;
// [lo, hi] its range), keeping the clamp whose output error over every
// calibration token (d^T C d, C the group's input covariance) is smallest.
// GPTQ (quantize/gptq.h) instead rounds each linear with error compensation
// under its group's X^T X; no scales.
#pragma once

#include "passes/Quantize.h"
#include "quantize/calibration.h"
#include "quantize/gptq.h"
#include "quantize/calibration_model.h"
#include "quantize/weight_table.h"
#include "support/thread_pool.h"

#include <optional>
#include <string>
#include <vector>

namespace llmc::quant {

struct QuantizeSettings {
  QuantizeConfig config;           // method, group size, scales only
  bool clip = false;               // AWQ's clipping search (on unless --no-awq-clip)
  // AWQ: also search the scales of groups after an RMSNorm (q/k/v, gate/up),
  // as the reference does (--awq-norm-scales); by default only the groups
  // whose scales fold into a linear (o_proj, down_proj) are searched, the
  // others keep s = 1 (docs/quantization.md: on stories260K those scales
  // lower the block error, also on held-out rows, but raise perplexity).
  bool normScales = false;
  bool actOrder = false;           // GPTQ: --gptq-act-order
  bool gptqRangeSearch = true;     // GPTQ: off with --no-gptq-range-search
  bool gptqRefitScales = true;     // GPTQ: off with --no-gptq-refit
  double gptqDampening = 0.003;    // GPTQ: times the mean of H's diagonal (--gptq-dampening)
  // Calibrate each segment on the outputs of the already quantized ones
  // (GPTQ's sequential mode; AWQ: the scaled and clipped ones), not on the
  // float model's (calibrateAndQuantize).
  bool sequential = false;
  int gridPoints = 20;             // alphas 0, 1/20, ..., 19/20
  std::optional<float> fixedAlpha; // tests: use this alpha, no search
};

// What happened to one group, for `llmc build -v` and docs/quantization.md.
// Errors are relative: output ||Y - Yq||^2 / ||Y||^2 on the sampled rows,
// weight ||W - W_eff||_F^2 / ||W||_F^2 with W_eff the dequantized weights
// unscaled (what the int4 model computes with). Without calibration (RTN)
// only the weight errors are known.
struct GroupReport {
  std::string label;
  bool scaled = false;
  bool searched = false; // the scales were searched (else s = 1: an RMSNorm sink, see normScales)
  float alpha = 0.0f;
  double rtnOutputError = 0, outputError = 0;
  double rtnWeightError = 0, weightError = 0;
  double weightNorm = 0; // ||W||_F^2 of the group, to weight averages
  double outputNorm = 0; // ||Y||^2
};

// Computes every tensor the quantize pass's rewritten IR names (q4 parts
// "<p>.qweight/.scales/.zeros", "<name>.awq_scaled") from the float weights
// in `source`, into `out`. AWQ and GPTQ need `activations` (one per group;
// GPTQ with the whole gram, AWQ's clipping its diagonal blocks) and the
// calibrated `model`, which evaluates a group's block output (AWQ's
// "module to inspect": attention + o_proj after q/k/v, the MLP after
// gate/up; other groups are measured on their own outputs). RTN needs
// neither; with them it also reports output errors.
Expected<std::vector<GroupReport>>
quantizeGroups(const std::vector<LinearGroup> &groups,
               const std::vector<GroupActivations> *activations, CalibrationModel *model,
               const WeightTable &source, const QuantizeSettings &settings, ThreadPool &pool,
               WeightTable &out, const Progress &progress = nullptr);

// Wall seconds spent per phase by calibrateAndQuantize (`llmc build` prints them).
struct PhaseTimes {
  double calibration = 0; // running the segments over the windows
  double search = 0;      // AWQ's scale search, or measuring the RTN errors
  double packing = 0;     // clipping, GPTQ and packing int4
};

// quantizeGroups on a model calibrated one segment at a time
// (SegmentedCalibration): per segment, its groups' statistics, their search
// and packing, then the rows of the next segment, from the float segment in
// the same pass or (settings.sequential) from a second pass of the segment
// with the weights the plan will compute with. The statistics of one
// segment are held at a time (GPTQ's X^T X: those of one half layer), and
// each segment's float weights are resident only while it is worked on
// (WeightTable::acquire / release). Without `sequential` the result is
// quantizeGroups' on calibrate()'s statistics, bit for bit.
Expected<std::vector<GroupReport>>
calibrateAndQuantize(const std::vector<LinearGroup> &groups, CalibrationModel &model,
                     const std::vector<int32_t> &ids, std::optional<int32_t> bos,
                     const CalibrationOptions &calibration, const WeightTable &source,
                     const QuantizeSettings &settings, ThreadPool &pool, WeightTable &out,
                     const Progress &progress = nullptr, PhaseTimes *times = nullptr);

// The groups (indices into `groups`) of each segment calibrateAndQuantize
// works on, in order: what it holds the statistics of at one time.
Expected<std::vector<std::vector<size_t>>>
calibrationSegments(const std::vector<LinearGroup> &groups, const CalibrationModel &model);

} // namespace llmc::quant
