#include "quantize/int8.h"

#include "kernels/common/half.h"
#include "ops/operands.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace llmc::quant {
namespace {

// One group w[0 .. count): its scale (f16-rounded when `halfScales`) and q
// into out[0 .. count). Returns false when the scale does not fit f16.
bool quantizeGroup(const float *w, int64_t count, bool halfScales, int8_t *q, float *scale,
                   uint16_t *halfBits) {
  float amax = 0.0f, poison = 0.0f;
  for (int64_t i = 0; i < count; ++i) {
    amax = std::max(amax, std::fabs(w[i]));
    poison += w[i] * 0.0f; // NaN when any value is NaN or Inf
  }
  if (std::isnan(poison)) {
    std::fill(q, q + count, int8_t{0}); // converting NaN to int is undefined
    *scale = NAN;
    if (halfScales)
      *halfBits = hd::f32ToF16(NAN);
    return true;
  }
  float s = amax / static_cast<float>(hd::kQ8MaxLevel);
  if (halfScales) {
    *halfBits = hd::f32ToF16(s);
    s = hd::f16ToF32(*halfBits);
    if (!std::isfinite(s))
      return false;
    // f16 rounding may shrink the scale below amax / 127: the clamp keeps q in range.
  }
  *scale = s;
  for (int64_t i = 0; i < count; ++i) {
    const float v = s > 0.0f ? std::nearbyint(w[i] / s) : 0.0f;
    q[i] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
  }
  return true;
}

} // namespace

Expected<Q8Tensor> quantizeQ8(ThreadPool &pool, const float *w, int64_t rows, int64_t cols,
                              int64_t groupSize, bool halfScales, const std::string &name) {
  if (!hd::q8ValidGroupSize(groupSize))
    return Status::error("int8 weight '" + name + "': group size " + std::to_string(groupSize) +
                         " is not 0 (per output channel) or a positive multiple of 32");
  if (rows <= 0 || cols <= 0)
    return Status::error("int8 weight '" + name + "': shape [" + std::to_string(rows) + ", " +
                         std::to_string(cols) + "] must have positive dimensions");
  Q8Tensor t;
  t.rows = rows;
  t.cols = cols;
  t.groupSize = groupSize;
  t.halfScales = halfScales;
  const int64_t rowBytes = hd::q8RowBytes(cols), groups = hd::q8NumGroups(cols, groupSize);
  const int64_t width = hd::q8GroupColumns(cols, groupSize);
  t.qweight.assign(rows * rowBytes, 0);
  t.scales.assign(rows * groups, 0.0f);
  if (halfScales)
    t.halfScaleBits.assign(rows * groups, 0);
  std::vector<int64_t> overflow(rows, -1); // per row: the first group whose scale overflows f16
  pool.parallelFor(rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t c0 = g * width, count = std::min(width, cols - c0);
        uint16_t bits = 0;
        if (!quantizeGroup(w + r * cols + c0, count, halfScales, &t.qweight[r * rowBytes + c0],
                           &t.scales[r * groups + g], &bits)) {
          overflow[r] = g;
          return;
        }
        if (halfScales)
          t.halfScaleBits[r * groups + g] = bits;
      }
  });
  for (int64_t r = 0; r < rows; ++r)
    if (overflow[r] >= 0)
      return Status::error("int8 weight '" + name + "': row " + std::to_string(r) + ", group " +
                           std::to_string(overflow[r]) +
                           " has a scale beyond f16's range; use f32 scales");
  if (halfScales)
    t.scales.clear();
  return t;
}

std::vector<float> dequantizeQ8(const Q8Tensor &q) {
  std::vector<float> w(q.rows * q.cols);
  const int64_t rowBytes = hd::q8RowBytes(q.cols), groups = hd::q8NumGroups(q.cols, q.groupSize);
  for (int64_t r = 0; r < q.rows; ++r) {
    const void *scales = q.halfScales ? static_cast<const void *>(&q.halfScaleBits[r * groups])
                                      : static_cast<const void *>(&q.scales[r * groups]);
    const auto *row = reinterpret_cast<const signed char *>(&q.qweight[r * rowBytes]);
    for (int64_t c = 0; c < q.cols; ++c)
      w[r * q.cols + c] = hd::q8Dequant(row, scales, q.halfScales, c, q.groupSize);
  }
  return w;
}

Status fakeQuantizeQ8(ThreadPool &pool, const float *w, int64_t rows, int64_t cols,
                      int64_t groupSize, bool halfScales, float *out, const std::string &name) {
  LLMC_ASSIGN_OR_RETURN(Q8Tensor q, quantizeQ8(pool, w, rows, cols, groupSize, halfScales, name));
  std::vector<float> values = dequantizeQ8(q);
  std::copy(values.begin(), values.end(), out);
  return Status::ok();
}

namespace {

// A weight source's values as f32 (its parts stacked when it has several).
Expected<std::vector<float>> sourceValues(const WeightSource &source, const std::string &name) {
  std::vector<float> values;
  values.reserve(source.elements);
  auto append = [&](const WeightSource &s) -> Status {
    if (s.data == nullptr)
      return Status::error("int8 weight '" + name + "': no stored values (--quantize int8 needs "
                           "checkpoint weights, not --synthetic-weights)");
    for (uint64_t i = 0; i < s.elements; ++i) {
      switch (s.dtype) {
      case DType::F32: {
        float v;
        std::memcpy(&v, s.data + 4 * i, 4);
        values.push_back(v);
        break;
      }
      case DType::F16:
      case DType::BF16: {
        uint16_t h;
        std::memcpy(&h, s.data + 2 * i, 2);
        values.push_back(s.dtype == DType::F16 ? hd::f16ToF32(h) : hd::bf16ToF32(h));
        break;
      }
      default:
        return Status::error("int8 weight '" + name + "': source dtype " +
                             std::string(dtypeName(s.dtype)) + " is not a float");
      }
    }
    return Status::ok();
  };
  if (source.parts.empty()) {
    LLMC_RETURN_IF_ERROR(append(source));
  } else {
    for (const WeightSource &part : source.parts)
      LLMC_RETURN_IF_ERROR(append(part));
  }
  if (values.size() != source.elements)
    return Status::error("int8 weight '" + name + "': " + std::to_string(values.size()) +
                         " values for " + std::to_string(source.elements) + " elements");
  return values;
}

} // namespace

Expected<int> quantizePlanLinearsQ8(ThreadPool &pool, PlanContents &plan, int64_t groupSize,
                                    std::vector<std::vector<uint8_t>> &storage,
                                    const Q8Selection &selected) {
  if (!hd::q8ValidGroupSize(groupSize))
    return Status::error("--group-size " + std::to_string(groupSize) +
                         " for int8 is not 0 (a scale per output channel) or a positive "
                         "multiple of 32");
  auto &tensors = plan.meta.tensors;
  // Matrices only dense Linear steps read (any other reader keeps the float tensor).
  std::vector<int> linearUses(tensors.size(), 0), otherUses(tensors.size(), 0);
  for (const auto &program : plan.meta.programs)
    for (const auto &step : program->steps) {
      const fb::LinearParamsT *p = step->params.AsLinearParams();
      const bool dense = p != nullptr && p->weights == fb::WeightFormat::Dense;
      const int matrix = dense ? (p->prologue ? (p->prologue->bias ? 2 : 1) : 0) : -1;
      for (size_t i = 0; i < step->weights.size(); ++i)
        ++(static_cast<int>(i) == matrix ? linearUses : otherUses)[step->weights[i]];
    }
  std::vector<int> scalesOf(tensors.size(), -1);
  const bool half = groupSize > 0;
  int converted = 0;
  for (size_t t = 0; t < scalesOf.size(); ++t) {
    if (linearUses[t] == 0 || otherUses[t] != 0)
      continue;
    fb::TensorT &tensor = *tensors[t];
    if (selected) {
      LLMC_ASSIGN_OR_RETURN(bool chosen, selected(tensor.name));
      if (!chosen)
        continue;
    }
    if (tensor.shape.size() != 2)
      return Status::error("int8 weight '" + tensor.name + "': a Linear matrix must be 2-D");
    const int64_t rows = tensor.shape[0], cols = tensor.shape[1];
    LLMC_ASSIGN_OR_RETURN(std::vector<float> values, sourceValues(plan.sources[t], tensor.name));
    LLMC_ASSIGN_OR_RETURN(Q8Tensor q,
                          quantizeQ8(pool, values.data(), rows, cols, groupSize, half, tensor.name));
    storage.emplace_back(reinterpret_cast<const uint8_t *>(q.qweight.data()),
                         reinterpret_cast<const uint8_t *>(q.qweight.data()) + q.qweight.size());
    plan.sources[t] = WeightSource{storage.back().data(), DType::I8, q.qweight.size(), {}};
    const std::string base = tensor.name;
    tensor.name = base + ".q8weight";
    tensor.dtype = fb::DType::I8;
    tensor.shape = {rows, hd::q8RowBytes(cols)};
    const uint8_t *scaleBytes = static_cast<const uint8_t *>(q.scaleData());
    const size_t scaleCount = half ? q.halfScaleBits.size() : q.scales.size();
    storage.emplace_back(scaleBytes, scaleBytes + scaleCount * (half ? 2 : 4));
    auto scales = std::make_unique<fb::TensorT>();
    scales->name = base + ".q8scales";
    scales->dtype = half ? fb::DType::F16 : fb::DType::F32;
    scales->shape = {rows, hd::q8NumGroups(cols, groupSize)};
    scalesOf[t] = static_cast<int>(tensors.size());
    tensors.push_back(std::move(scales));
    plan.sources.push_back(
        WeightSource{storage.back().data(), half ? DType::F16 : DType::F32, scaleCount, {}});
    ++converted;
  }
  for (const auto &program : plan.meta.programs)
    for (const auto &step : program->steps) {
      fb::LinearParamsT *p = step->params.AsLinearParams();
      if (p == nullptr || p->weights != fb::WeightFormat::Dense)
        continue;
      const int matrix = p->prologue ? (p->prologue->bias ? 2 : 1) : 0;
      const int scales = scalesOf[step->weights[matrix]];
      if (scales < 0)
        continue;
      step->weights.insert(step->weights.begin() + matrix + 1, scales);
      p->weights = fb::WeightFormat::Q8;
      p->group_size = groupSize;
      step->library_gemm.reset(); // cuBLASLt takes dense weights only
    }
  return converted;
}

} // namespace llmc::quant
