#include "quantize/int8.h"

#include <algorithm>
#include <cmath>
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

} // namespace llmc::quant
