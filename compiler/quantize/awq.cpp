#include "quantize/awq.h"

#include "cpu/matmul.h"
#include "lower_to_plan.h"
#include "quantize/q4_quantize.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>

namespace llmc::quant {
namespace {

std::string weightName(mlir::Value weight) {
  return weight.getDefiningOp<llm::WeightOp>().getName().str();
}

// One float linear weight [rows, cols], as f32.
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> values;
};

Expected<Matrix> loadMatrix(const WeightTable &table, const std::string &name) {
  LLMC_ASSIGN_OR_RETURN(const WeightEntry *entry, table.get(name));
  if (entry->shape.size() != 2)
    return Status::error("weight '" + name + "': expected a matrix");
  Matrix m{entry->shape[0], entry->shape[1], {}};
  LLMC_ASSIGN_OR_RETURN(m.values, table.toF32(name));
  return m;
}

// y [rows, w.rows] = x [rows, w.cols] . w^T.
std::vector<float> project(ThreadPool &pool, const std::vector<float> &x, int64_t rows,
                           const Matrix &w) {
  std::vector<float> y(rows * w.rows);
  if (rows > 0)
    cpu::matmul(pool, x.data(), rows, {w.values.data(), DType::F32, w.rows, w.cols}, nullptr, 0.0f,
                y.data());
  return y;
}

double squaredDistance(const std::vector<float> &a, const std::vector<float> &b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = static_cast<double>(a[i]) - b[i];
    sum += d * d;
  }
  return sum;
}

double squaredNorm(const std::vector<float> &a) {
  double sum = 0;
  for (float v : a)
    sum += static_cast<double>(v) * v;
  return sum;
}

// The group's scales on its K input columns from scales on its sink channels.
std::vector<float> expandScales(const LinearGroup &group, const std::vector<float> &sinkScales) {
  std::vector<float> s(group.cols);
  for (int64_t c = 0; c < group.cols; ++c)
    s[c] = sinkScales[group.sinkChannel(c)];
  return s;
}

// AWQ's scales for one alpha: mean|x|^alpha per sink channel (the mean over
// the columns that share a channel), floored at 1e-4, normalized so that
// max * min == 1.
std::vector<float> scalesForAlpha(const LinearGroup &group, const GroupActivations &act,
                                  float alpha) {
  std::vector<double> sum(group.sinkChannels, 0.0);
  std::vector<int64_t> count(group.sinkChannels, 0);
  for (int64_t c = 0; c < group.cols; ++c) {
    sum[group.sinkChannel(c)] += act.meanAbs[c];
    ++count[group.sinkChannel(c)];
  }
  std::vector<float> s(group.sinkChannels);
  float lo = std::numeric_limits<float>::max(), hi = 0.0f;
  for (int64_t i = 0; i < group.sinkChannels; ++i) {
    double mean = count[i] > 0 ? sum[i] / count[i] : 1.0;
    s[i] = std::max(static_cast<float>(std::pow(mean, alpha)), 1e-4f);
    lo = std::min(lo, s[i]);
    hi = std::max(hi, s[i]);
  }
  float norm = std::sqrt(lo * hi);
  for (float &v : s)
    v /= norm;
  return s;
}

// The weights the model computes with: diag(rowScale) . dequant(Q(W')) .
// diag(1 / colScale) for the stored W'; empty scale vectors mean 1.
std::vector<float> effectiveWeights(ThreadPool &pool, const std::vector<float> &stored,
                                    int64_t rows, int64_t cols, int64_t groupSize,
                                    const std::vector<float> &colScale,
                                    const std::vector<float> &rowScale, bool quantize) {
  std::vector<float> out(stored.size());
  pool.parallelFor(
      rows,
      [&](int64_t begin, int64_t end) {
        for (int64_t n = begin; n < end; ++n) {
          float *row = out.data() + n * cols;
          if (quantize)
            fakeQuantizeRow(stored.data() + n * cols, cols, groupSize, row);
          else
            std::copy_n(stored.data() + n * cols, cols, row);
          float r = rowScale.empty() ? 1.0f : rowScale[n];
          for (int64_t k = 0; k < cols; ++k)
            row[k] *= r / (colScale.empty() ? 1.0f : colScale[k]);
        }
      },
      8);
  return out;
}

// W . diag(colScale) with rows divided by rowScale (empty: 1).
std::vector<float> applyScales(const Matrix &w, const std::vector<float> &colScale,
                               const std::vector<float> &rowScale) {
  std::vector<float> out = w.values;
  for (int64_t n = 0; n < w.rows; ++n)
    for (int64_t k = 0; k < w.cols; ++k)
      out[n * w.cols + k] *=
          (colScale.empty() ? 1.0f : colScale[k]) / (rowScale.empty() ? 1.0f : rowScale[n]);
  return out;
}

// The input covariance of each group of columns, C_g = x_g^T x_g / rows,
// for the scaled inputs x / s (colScale s; empty: 1): from the calibration's
// diagonal gram blocks over every token when they match the group size
// (a matrix narrower than one group has one block, the whole gram), else
// from the sampled rows.
std::vector<std::vector<float>> groupCovariances(const GroupActivations &act, int64_t groupSize,
                                                 const std::vector<float> &colScale) {
  const int64_t cols = act.cols, groups = (cols + groupSize - 1) / groupSize;
  auto s = [&](int64_t k) { return colScale.empty() ? 1.0f : colScale[k]; };
  std::vector<std::vector<float>> cov(groups);
  const bool fromGram = act.gramBlock == std::min(groupSize, cols) && act.totalRows > 0;
  const float *gram = act.gram.data();
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t begin = g * groupSize, size = std::min(groupSize, cols - begin);
    std::vector<float> &c = cov[g];
    c.assign(size * size, 0.0f);
    if (fromGram) {
      for (int64_t i = 0; i < size; ++i)
        for (int64_t j = 0; j < size; ++j)
          c[i * size + j] = gram[i * size + j] / static_cast<float>(act.totalRows) /
                            (s(begin + i) * s(begin + j));
      gram += size * size;
      continue;
    }
    for (int64_t t = 0; t < act.sampleRows; ++t) {
      const float *xt = act.sample.data() + t * cols + begin;
      for (int64_t i = 0; i < size; ++i)
        for (int64_t j = 0; j < size; ++j)
          c[i * size + j] += xt[i] * xt[j] / (s(begin + i) * s(begin + j)) /
                             static_cast<float>(act.sampleRows);
    }
  }
  return cov;
}

// The clipping grid: a group's range [lo, hi] (lo = min(w, 0), hi =
// max(w, 0)) shrinks to [lo (1 - a / 40), hi (1 - b / 40)], a, b < 20,
// each side on its own. AWQ's auto_clip shrinks one symmetric bound
// max|w| in steps of 1/20 to 0.55; with zero points that only moves the
// wider side, and on stories260K the two-sided finer grid removes twice as
// much of RTN's perplexity loss (docs/quantization.md).
constexpr int kClipSteps = 20, kClipDivisions = 40;

float clipFactor(int step) { return 1.0f - static_cast<float>(step) / kClipDivisions; }

// d = Q(clamp(w, lo f_a, hi f_b)) - w for rows begin .. end of one column
// group of w [rows, cols] (columns first .. first + size), into d [rows, size].
void clippedErrors(const std::vector<float> &w, int64_t cols, int64_t first, int64_t size,
                   const std::vector<float> &lo, const std::vector<float> &hi, float loFactor,
                   float hiFactor, int64_t begin, int64_t end, std::vector<float> &d) {
  std::vector<float> clamped(size), quantized(size);
  for (int64_t n = begin; n < end; ++n) {
    const float *wg = w.data() + n * cols + first;
    for (int64_t i = 0; i < size; ++i)
      clamped[i] = std::clamp(wg[i], lo[n] * loFactor, hi[n] * hiFactor);
    fakeQuantizeGroup(clamped.data(), size, quantized.data());
    for (int64_t i = 0; i < size; ++i)
      d[n * size + i] = quantized[i] - wg[i];
  }
}

// AWQ's clipping search on scaled weights w [rows, cols] with the scaled
// inputs' covariances `cov` (groupCovariances): per (row, group), the
// clamp (clipFactor grid) whose quantized group minimizes the error of its
// partial dot products over the calibration tokens, d^T C d with
// d = Q(clamp(w)) - w. The errors of one candidate for all rows of a group
// are one product D C [rows, size] on the CPU matmul. Every linear is
// clipped, q and k included (the reference skips them: its error is not
// the attention scores' either way; on stories260K clipping them too
// helps, docs/quantization.md).
void clipWeights(ThreadPool &pool, std::vector<float> &w, int64_t rows, int64_t cols,
                   int64_t groupSize, const std::vector<std::vector<float>> &cov) {
  const int64_t groups = (cols + groupSize - 1) / groupSize;
  std::vector<float> lo(rows), hi(rows), d, dc;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t first = g * groupSize, size = std::min(groupSize, cols - first);
    for (int64_t n = 0; n < rows; ++n) {
      const float *wg = w.data() + n * cols + first;
      lo[n] = std::min(0.0f, *std::min_element(wg, wg + size));
      hi[n] = std::max(0.0f, *std::max_element(wg, wg + size));
    }
    d.resize(rows * size);
    dc.resize(rows * size);
    std::vector<double> bestErr(rows, std::numeric_limits<double>::infinity());
    std::vector<int> bestLo(rows, 0), bestHi(rows, 0);
    for (int a = 0; a < kClipSteps; ++a)
      for (int b = 0; b < kClipSteps; ++b) {
        pool.parallelFor(
            rows,
            [&](int64_t begin, int64_t end) {
              clippedErrors(w, cols, first, size, lo, hi, clipFactor(a), clipFactor(b), begin,
                            end, d);
            },
            16);
        cpu::matmul(pool, d.data(), rows, {cov[g].data(), DType::F32, size, size}, nullptr, 0.0f,
                    dc.data());
        for (int64_t n = 0; n < rows; ++n) {
          double err = 0;
          for (int64_t i = 0; i < size; ++i)
            err += static_cast<double>(d[n * size + i]) * dc[n * size + i];
          if (err < bestErr[n]) {
            bestErr[n] = err;
            bestLo[n] = a;
            bestHi[n] = b;
          }
        }
      }
    for (int64_t n = 0; n < rows; ++n) {
      float *wg = w.data() + n * cols + first;
      for (int64_t i = 0; i < size; ++i)
        wg[i] = std::clamp(wg[i], lo[n] * clipFactor(bestLo[n]), hi[n] * clipFactor(bestHi[n]));
    }
  }
}

// What a group's output error is measured on: AWQ's "module to inspect".
// For q/k/v and gate/up, the block they feed (attention + o_proj, the MLP
// through down_proj): the one linear outside the group that every path
// from the group's results reaches through rope, attention, silu and mul.
// Otherwise (o_proj, down_proj, anything else) the group's own outputs:
// an empty value.
mlir::Value blockOutput(const LinearGroup &group) {
  llvm::DenseSet<mlir::Value> inside;
  llvm::SmallVector<mlir::Value> worklist;
  for (llm::LinearOp linear : group.linears) {
    inside.insert(linear.getResult());
    worklist.push_back(linear.getResult());
  }
  llm::LinearOp reached;
  auto reads = [&](mlir::Operation *op) {
    return llvm::all_of(op->getOperands(), [&](mlir::Value v) {
      return inside.count(v) || v.getDefiningOp<llm::WeightOp>() ||
             llvm::isa<mlir::BlockArgument>(v);
    });
  };
  while (!worklist.empty()) {
    mlir::Value value = worklist.pop_back_val();
    for (mlir::Operation *user : value.getUsers()) {
      if (auto linear = llvm::dyn_cast<llm::LinearOp>(user)) {
        if (reached && reached != linear)
          return {};
        reached = linear;
        continue;
      }
      if (!llvm::isa<llm::RopeOp, llm::AttentionOp, llm::SiluOp, llm::MulOp>(user))
        return {};
      if (inside.count(user->getResult(0)))
        continue;
      if (!reads(user)) // e.g. an attention whose k comes from elsewhere: not yet, or never
        continue;
      inside.insert(user->getResult(0));
      worklist.push_back(user->getResult(0));
    }
  }
  if (!reached || !reads(reached))
    return {};
  return reached.getResult();
}

class GroupQuantizer {
public:
  GroupQuantizer(const std::vector<LinearGroup> &groups,
                 const std::vector<GroupActivations> *activations, CalibrationModel *model,
                 const WeightTable &source, const QuantizeSettings &settings, ThreadPool &pool,
                 WeightTable &out)
      : groups_(groups), activations_(activations), model_(model), source_(source),
        settings_(settings), pool_(pool), out_(out), reports_(groups.size()),
        scales_(groups.size()) {
    for (size_t g = 0; g < groups.size(); ++g) {
      reports_[g].label = groups[g].label();
      if (awq() && groups[g].scalable())
        sinkOf_[groups[g].sinkOp] = g;
    }
  }

  Status run(const Progress &progress) {
    const std::string search = awq() ? "AWQ search" : "measuring";
    const std::string packing = settings_.config.scalesOnly ? "scaling"
                             : gptq()                    ? "GPTQ"
                                                         : "packing int4";
    for (size_t g = 0; g < groups_.size(); ++g) {
      if (progress)
        progress(search, g, groups_.size());
      LLMC_RETURN_IF_ERROR(this->search(g));
    }
    if (progress)
      progress(search, groups_.size(), groups_.size());
    for (size_t g = 0; g < groups_.size(); ++g) {
      if (progress)
        progress(packing, g, groups_.size());
      LLMC_RETURN_IF_ERROR(materialize(g));
      // Without a calibration model nothing reads the group's float
      // weights again: their pages go back (an RTN build of a checkpoint
      // keeps one group's resident, not the model's).
      if (model_ == nullptr)
        source_.release(weightNames(g));
    }
    if (progress)
      progress(packing, groups_.size(), groups_.size());
    return Status::ok();
  }

  // Searches, then packs, the groups `gs` (whose sinks are among them),
  // timing each phase into `times`.
  Status quantizeSubset(const std::vector<size_t> &gs, PhaseTimes &times) {
    auto start = std::chrono::steady_clock::now();
    auto lap = [&start] {
      auto now = std::chrono::steady_clock::now();
      double seconds = std::chrono::duration<double>(now - start).count();
      start = now;
      return seconds;
    };
    for (size_t g : gs)
      LLMC_RETURN_IF_ERROR(search(g));
    times.search += lap();
    for (size_t g : gs)
      LLMC_RETURN_IF_ERROR(materialize(g));
    times.packing += lap();
    return Status::ok();
  }

  // materialize() stores each linear's effective weights [N, K] here, by
  // weight name (null: not kept).
  void keepEffectiveWeights(std::map<std::string, Matrix> *effective) { effective_ = effective; }

  std::vector<GroupReport> takeReports() { return std::move(reports_); }

private:
  // The group's sampled inputs and what its output error is measured on.
  struct Probe {
    const GroupActivations *act = nullptr;
    mlir::Value target;                        // block output, or empty: each linear's
    std::vector<std::vector<float>> reference; // full-precision outputs
  };

  bool awq() const { return settings_.config.method == QuantizeMethod::Awq; }
  bool gptq() const { return settings_.config.method == QuantizeMethod::Gptq; }
  bool scaled(size_t g) const { return awq() && groups_[g].scalable(); }

  // Null when the group has no calibration sample (RTN).
  Expected<std::unique_ptr<Probe>> probe(size_t g, const std::vector<Matrix> &weights) {
    if (activations_ == nullptr || (*activations_)[g].sampleRows == 0)
      return std::unique_ptr<Probe>();
    auto p = std::make_unique<Probe>();
    p->act = &(*activations_)[g];
    if (model_ != nullptr)
      p->target = blockOutput(groups_[g]);
    if (p->target) {
      LLMC_ASSIGN_OR_RETURN(std::vector<float> y,
                            model_->runSlice(groups_[g].input, p->act->sample.data(),
                                             p->act->sampleRows, p->act->sequences, p->target));
      p->reference.push_back(std::move(y));
    } else {
      for (const Matrix &w : weights)
        p->reference.push_back(project(pool_, p->act->sample, p->act->sampleRows, w));
    }
    return p;
  }

  // ||reference - output||^2 with the group's linears computing with `eff`.
  Expected<double> outputError(size_t g, const Probe &p, const std::vector<Matrix> &eff) {
    if (!p.target) {
      double err = 0;
      for (size_t l = 0; l < eff.size(); ++l)
        err += squaredDistance(project(pool_, p.act->sample, p.act->sampleRows, eff[l]),
                               p.reference[l]);
      return err;
    }
    CalibrationModel::WeightOverrides overrides;
    for (size_t l = 0; l < eff.size(); ++l)
      overrides[weightName(llm::LinearOp(groups_[g].linears[l]).getWeight())] = {
          eff[l].values.data(), DType::F32, eff[l].rows, eff[l].cols};
    LLMC_ASSIGN_OR_RETURN(std::vector<float> y,
                          model_->runSlice(groups_[g].input, p.act->sample.data(),
                                           p.act->sampleRows, p.act->sequences, p.target,
                                           overrides));
    return squaredDistance(y, p.reference.front());
  }

  // fake-quantized W . diag(s), unscaled: what the model computes with.
  std::vector<Matrix> effective(const std::vector<Matrix> &weights, const std::vector<float> &s) {
    std::vector<Matrix> eff;
    for (const Matrix &w : weights)
      eff.push_back({w.rows, w.cols,
                     effectiveWeights(pool_, applyScales(w, s, {}), w.rows, w.cols,
                                      settings_.config.groupSize, s, {}, true)});
    return eff;
  }

  std::vector<std::string> weightNames(size_t g) const {
    std::vector<std::string> names;
    for (llm::LinearOp linear : groups_[g].linears)
      names.push_back(weightName(linear.getWeight()));
    return names;
  }

  Expected<std::vector<Matrix>> loadGroup(size_t g) {
    std::vector<Matrix> weights;
    for (llm::LinearOp linear : groups_[g].linears) {
      LLMC_ASSIGN_OR_RETURN(Matrix w, loadMatrix(source_, weightName(linear.getWeight())));
      weights.push_back(std::move(w));
    }
    return weights;
  }

  // Picks the group's scales: the alpha whose output error on the sample
  // is smallest (alpha 0, RTN, included).
  Status search(size_t g) {
    const LinearGroup &group = groups_[g];
    GroupReport &report = reports_[g];
    report.scaled = scaled(g);
    scales_[g].assign(group.sinkChannels, 1.0f);
    if (activations_ == nullptr || (*activations_)[g].sampleRows == 0)
      return Status::ok(); // RTN: nothing to search or measure (probe), no weights to read
    LLMC_ASSIGN_OR_RETURN(std::vector<Matrix> weights, loadGroup(g));
    LLMC_ASSIGN_OR_RETURN(std::unique_ptr<Probe> p, probe(g, weights));
    if (!p)
      return Status::ok();
    for (const std::vector<float> &y : p->reference)
      report.outputNorm += squaredNorm(y);
    LLMC_ASSIGN_OR_RETURN(report.rtnOutputError, outputError(g, *p, effective(weights, {})));
    if (!report.scaled ||
        (isNormSink(group.sink) && !settings_.normScales && !settings_.fixedAlpha))
      return Status::ok();
    report.searched = true;
    double best = report.rtnOutputError;
    std::vector<float> alphas;
    if (settings_.fixedAlpha)
      alphas.push_back(*settings_.fixedAlpha);
    else
      for (int i = 1; i < settings_.gridPoints; ++i) // i = 0 is RTN, measured above
        alphas.push_back(static_cast<float>(i) / settings_.gridPoints);
    for (float alpha : alphas) {
      std::vector<float> s = scalesForAlpha(group, *p->act, alpha);
      LLMC_ASSIGN_OR_RETURN(double err,
                            outputError(g, *p, effective(weights, expandScales(group, s))));
      if (!std::isfinite(err))
        return Status::error(report.label + ": the output error is not finite (alpha " +
                             std::to_string(alpha) + "); are the calibration activations?");
      if (err < best || settings_.fixedAlpha) {
        best = err;
        report.alpha = alpha;
        scales_[g] = std::move(s);
      }
    }
    return Status::ok();
  }

  // Writes the group's linears (int4, or scaled floats) and what its scales
  // fold into; measures the final errors.
  Status materialize(size_t g) {
    const LinearGroup &group = groups_[g];
    GroupReport &report = reports_[g];
    const std::vector<float> colScale =
        scaled(g) ? expandScales(group, scales_[g]) : std::vector<float>();
    LLMC_ASSIGN_OR_RETURN(std::vector<Matrix> weights, loadGroup(g));
    std::vector<Matrix> eff;
    for (size_t l = 0; l < weights.size(); ++l) {
      LLMC_ASSIGN_OR_RETURN(Matrix e, materializeLinear(g, group.linears[l], weights[l], colScale));
      if (effective_ != nullptr)
        (*effective_)[weightName(llm::LinearOp(group.linears[l]).getWeight())] = e;
      report.weightNorm += squaredNorm(weights[l].values);
      report.weightError += squaredDistance(e.values, weights[l].values);
      report.rtnWeightError +=
          squaredDistance(effective({weights[l]}, {}).front().values, weights[l].values);
      eff.push_back(std::move(e));
    }
    LLMC_ASSIGN_OR_RETURN(std::unique_ptr<Probe> p, probe(g, weights));
    if (p) {
      LLMC_ASSIGN_OR_RETURN(report.outputError, outputError(g, *p, eff));
    }
    if (!scaled(g))
      return Status::ok();
    if (auto norm = llvm::dyn_cast<llm::RmsNormOp>(group.sinkOp))
      return writeDivided(weightName(norm.getWeight()), scales_[g]);
    if (auto layer = llvm::dyn_cast<llm::LayerNormOp>(group.sinkOp)) {
      LLMC_RETURN_IF_ERROR(writeDivided(weightName(layer.getWeight()), scales_[g]));
      if (layer.getBias())
        return writeDivided(weightName(layer.getBias()), scales_[g]);
      return Status::ok();
    }
    auto sink = llvm::cast<llm::LinearOp>(group.sinkOp);
    if (sink.getBias())
      return writeDivided(weightName(sink.getBias()), scales_[g]);
    return Status::ok();
  }

  // `<name>.awq_scaled` = vector / scales.
  Status writeDivided(const std::string &name, const std::vector<float> &scales) {
    LLMC_ASSIGN_OR_RETURN(std::vector<float> v, source_.toF32(name));
    if (v.size() != scales.size())
      return Status::error("weight '" + name + "': " + std::to_string(v.size()) + " values for " +
                           std::to_string(scales.size()) + " AWQ scales");
    for (size_t i = 0; i < v.size(); ++i)
      v[i] /= scales[i];
    int64_t size = static_cast<int64_t>(v.size());
    out_.addOwned(awqScaledName(name), std::move(v), {size});
    return Status::ok();
  }

  // Stores one linear (scaled, clipped, packed) and returns the weights the
  // model will compute with.
  Expected<Matrix> materializeLinear(size_t g, llm::LinearOp linear, const Matrix &w,
                                     const std::vector<float> &colScale) {
    const std::string name = weightName(linear.getWeight());
    std::vector<float> rowScale;
    auto sink = sinkOf_.find(linear.getOperation());
    if (sink != sinkOf_.end())
      rowScale = scales_[sink->second];
    std::vector<float> stored = applyScales(w, colScale, rowScale);
    const bool quantize = !settings_.config.scalesOnly;
    const GroupActivations *act = activations_ ? &(*activations_)[g] : nullptr;
    if (quantize && awq() && settings_.clip && act != nullptr && act->sampleRows > 0)
      clipWeights(pool_, stored, w.rows, w.cols, settings_.config.groupSize,
                  groupCovariances(*act, settings_.config.groupSize, colScale));
    if (!quantize) {
      Matrix eff{w.rows, w.cols,
                 effectiveWeights(pool_, stored, w.rows, w.cols, settings_.config.groupSize,
                                  colScale, rowScale, false)};
      if (!colScale.empty() || !rowScale.empty())
        out_.addOwned(awqScaledName(name), std::move(stored), {w.rows, w.cols});
      return eff;
    }
    LLMC_ASSIGN_OR_RETURN(Q4Tensor q, pack(name, stored, w, act));
    Matrix eff{w.rows, w.cols, dequantizeQ4(q)};
    for (int64_t n = 0; n < w.rows; ++n)
      for (int64_t k = 0; k < w.cols; ++k)
        eff.values[n * w.cols + k] *= (rowScale.empty() ? 1.0f : rowScale[n]) /
                                      (colScale.empty() ? 1.0f : colScale[k]);
    const std::string base = q4WeightName(name);
    const int64_t words = static_cast<int64_t>(q.qweight.size()) / w.rows;
    const int64_t groups = static_cast<int64_t>(q.scales.size()) / w.rows;
    out_.addOwned(q4TensorName(base, Q4Part::Weight), std::move(q.qweight), {w.rows, words});
    out_.addOwned(q4TensorName(base, Q4Part::Scales), std::move(q.scales), {w.rows, groups});
    out_.addOwned(q4TensorName(base, Q4Part::Zeros), std::move(q.zeros), {w.rows, groups});
    return eff;
  }

  // The int4 coding of the stored weights: GPTQ under the group's gram, or
  // round to nearest.
  Expected<Q4Tensor> pack(const std::string &name, const std::vector<float> &stored,
                          const Matrix &w, const GroupActivations *act) {
    if (!gptq())
      return quantizeQ4(pool_, stored.data(), w.rows, w.cols, settings_.config.groupSize);
    if (act == nullptr || act->gramBlock < w.cols || act->totalRows == 0)
      return Status::error("weight '" + name + "': GPTQ needs the calibration's X^T X");
    GptqOptions options;
    options.groupSize = settings_.config.groupSize;
    options.actOrder = settings_.actOrder;
    options.dampening = settings_.gptqDampening;
    options.rangeSearch = settings_.gptqRangeSearch;
    options.refitScales = settings_.gptqRefitScales;
    auto q = gptqQuantize(pool_, stored.data(), w.rows, w.cols, act->gram, options);
    if (!q)
      return q.status().withContext("weight '" + name + "'");
    return q;
  }

  const std::vector<LinearGroup> &groups_;
  const std::vector<GroupActivations> *activations_;
  CalibrationModel *model_;
  const WeightTable &source_;
  const QuantizeSettings &settings_;
  ThreadPool &pool_;
  WeightTable &out_;
  std::vector<GroupReport> reports_;
  std::vector<std::vector<float>> scales_;           // per group, on its sink channels
  llvm::DenseMap<mlir::Operation *, size_t> sinkOf_; // sink linear -> the group it absorbs
  std::map<std::string, Matrix> *effective_ = nullptr;
};

} // namespace

Expected<std::vector<GroupReport>>
quantizeGroups(const std::vector<LinearGroup> &groups,
               const std::vector<GroupActivations> *activations, CalibrationModel *model,
               const WeightTable &source, const QuantizeSettings &settings, ThreadPool &pool,
               WeightTable &out, const Progress &progress) {
  if (settings.config.method != QuantizeMethod::Rtn && activations == nullptr)
    return Status::error("AWQ and GPTQ need calibration activations");
  if (activations != nullptr && activations->size() != groups.size())
    return Status::error("internal: calibration data for " + std::to_string(activations->size()) +
                         " groups, " + std::to_string(groups.size()) + " expected");
  GroupQuantizer quantizer(groups, activations, model, source, settings, pool, out);
  LLMC_RETURN_IF_ERROR(quantizer.run(progress));
  return quantizer.takeReports();
}

namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Each group's block output (blockOutput), where the model measures it.
std::vector<mlir::Value> blockOutputs(const std::vector<LinearGroup> &groups) {
  std::vector<mlir::Value> outputs;
  for (const LinearGroup &group : groups)
    outputs.push_back(blockOutput(group));
  return outputs;
}

} // namespace

Expected<std::vector<std::vector<size_t>>>
calibrationSegments(const std::vector<LinearGroup> &groups, const CalibrationModel &model) {
  LLMC_ASSIGN_OR_RETURN(SegmentedCalibration::Plan plan,
                        SegmentedCalibration::plan(model, groups, blockOutputs(groups)));
  return std::move(plan.groupsOf);
}

Expected<std::vector<GroupReport>>
calibrateAndQuantize(const std::vector<LinearGroup> &groups, CalibrationModel &model,
                     const std::vector<int32_t> &ids, std::optional<int32_t> bos,
                     const CalibrationOptions &calibration, const WeightTable &source,
                     const QuantizeSettings &settings, ThreadPool &pool, WeightTable &out,
                     const Progress &progress, PhaseTimes *times) {
  LLMC_ASSIGN_OR_RETURN(SegmentedCalibration segments,
                        SegmentedCalibration::create(model, groups, blockOutputs(groups), ids,
                                                     bos, calibration, pool));
  // One entry per group; only the current segment's are filled.
  std::vector<GroupActivations> activations(groups.size());
  GroupQuantizer quantizer(groups, &activations, &model, source, settings, pool, out);
  std::map<std::string, Matrix> effective;
  if (settings.sequential)
    quantizer.keepEffectiveWeights(&effective);
  PhaseTimes phases;
  const std::string task = settings.config.method == QuantizeMethod::Awq    ? "AWQ"
                           : settings.config.method == QuantizeMethod::Gptq ? "GPTQ"
                                                                            : "RTN";
  // One bar over every segment's passes over the windows.
  const uint64_t perPass = static_cast<uint64_t>(segments.totalRows());
  const uint64_t total = perPass * static_cast<uint64_t>(segments.numSegments()) *
                         (settings.sequential ? 2 : 1);
  uint64_t passesDone = 0;
  // The last segment's search and packing come after its last pass: the
  // bar is full only at the end.
  auto passProgress = [&](const std::string &, uint64_t done, uint64_t) {
    if (progress)
      progress(task, std::min(passesDone * perPass + done, total - 1), total);
  };
  for (int64_t i = 0; i < segments.numSegments(); ++i) {
    const std::vector<size_t> &members = segments.groupsOf(i);
    const bool twoPasses = settings.sequential && !members.empty() && segments.segment(i).output;
    // The segment's float weights are resident while it is worked on.
    const std::vector<std::string> weights = model.weightsOf(segments.segment(i));
    source.acquire(weights);
    auto start = std::chrono::steady_clock::now();
    LLMC_ASSIGN_OR_RETURN(std::vector<GroupActivations> stats,
                          segments.collect(i, !twoPasses, passProgress));
    ++passesDone;
    phases.calibration += secondsSince(start);
    for (size_t k = 0; k < members.size(); ++k)
      activations[members[k]] = std::move(stats[k]);
    LLMC_RETURN_IF_ERROR(quantizer.quantizeSubset(members, phases));
    for (size_t g : members)
      activations[g] = GroupActivations();
    if (twoPasses) {
      start = std::chrono::steady_clock::now();
      CalibrationModel::WeightOverrides overrides;
      for (const auto &[name, m] : effective)
        overrides[name] = {m.values.data(), DType::F32, m.rows, m.cols};
      LLMC_RETURN_IF_ERROR(segments.advance(i, overrides, passProgress));
      phases.calibration += secondsSince(start);
    }
    if (settings.sequential)
      ++passesDone;
    effective.clear();
    source.release(weights);
  }
  if (progress)
    progress(task, total, total);
  if (times != nullptr)
    *times = phases;
  return quantizer.takeReports();
}

} // namespace llmc::quant
