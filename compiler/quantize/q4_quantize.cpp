#include "quantize/q4_quantize.h"

#include "kernels/common/q4_layout.h"

#include <algorithm>
#include <cmath>

namespace llmc::quant {
namespace {

// One group's f16 scale and zero point, and its values 0..15.
struct GroupCode {
  uint16_t scale, zero;
  float scaleF, zeroF;
};

GroupCode codeGroup(const float *w, int64_t count) {
  float lo = 0.0f, hi = 0.0f; // the range includes 0 (see the header)
  for (int64_t i = 0; i < count; ++i) {
    lo = std::min(lo, w[i]);
    hi = std::max(hi, w[i]);
  }
  GroupCode c;
  c.scale = hd::f32ToF16(std::max(hi - lo, 1e-5f) / 15.0f);
  c.scaleF = hd::f16ToF32(c.scale);
  if (c.scaleF <= 0.0f) { // underflowed f16: the smallest positive one
    c.scale = 1;
    c.scaleF = hd::f16ToF32(1);
  }
  c.zeroF = std::clamp(-std::nearbyint(lo / c.scaleF), 0.0f, 15.0f);
  c.zero = hd::f32ToF16(c.zeroF);
  return c;
}

inline int quantizeValue(float w, const GroupCode &c) {
  return static_cast<int>(std::clamp(std::nearbyint(w / c.scaleF) + c.zeroF, 0.0f, 15.0f));
}

void quantizeRow(const float *w, int64_t cols, int64_t groupSize, uint32_t *words, uint16_t *scales,
                 uint16_t *zeros) {
  const int64_t wordsPerRow = hd::q4WordsPerRow(cols), groups = hd::q4NumGroups(cols, groupSize);
  std::fill(words, words + wordsPerRow, 0u);
  GroupCode code{};
  for (int64_t g = 0; g < groups; ++g) {
    int64_t begin = g * groupSize, count = std::min(groupSize, cols - begin);
    code = codeGroup(w + begin, count);
    scales[g] = code.scale;
    zeros[g] = code.zero;
    for (int64_t k = begin; k < begin + count; ++k)
      words[k / 8] |= static_cast<uint32_t>(quantizeValue(w[k], code)) << (4 * (k % 8));
  }
  // Pad nibbles hold the last group's zero point: they dequantize to 0.
  for (int64_t k = cols; k < wordsPerRow * 8; ++k)
    words[k / 8] |= static_cast<uint32_t>(code.zeroF) << (4 * (k % 8));
}

} // namespace

Q4Tensor quantizeQ4(ThreadPool &pool, const float *w, int64_t rows, int64_t cols,
                    int64_t groupSize) {
  Q4Tensor q;
  q.rows = rows;
  q.cols = cols;
  q.groupSize = groupSize;
  const int64_t words = hd::q4WordsPerRow(cols), groups = hd::q4NumGroups(cols, groupSize);
  q.qweight.resize(rows * words);
  q.scales.resize(rows * groups);
  q.zeros.resize(rows * groups);
  pool.parallelFor(
      rows,
      [&](int64_t begin, int64_t end) {
        for (int64_t n = begin; n < end; ++n)
          quantizeRow(w + n * cols, cols, groupSize, q.qweight.data() + n * words,
                      q.scales.data() + n * groups, q.zeros.data() + n * groups);
      },
      16);
  return q;
}

void fakeQuantizeGroup(const float *w, int64_t count, float *out) {
  GroupCode code = codeGroup(w, count);
  for (int64_t i = 0; i < count; ++i)
    out[i] = (static_cast<float>(quantizeValue(w[i], code)) - code.zeroF) * code.scaleF;
}

void fakeQuantizeRow(const float *w, int64_t cols, int64_t groupSize, float *out) {
  for (int64_t begin = 0; begin < cols; begin += groupSize)
    fakeQuantizeGroup(w + begin, std::min(groupSize, cols - begin), out + begin);
}

std::vector<float> dequantizeQ4(const Q4Tensor &q) {
  const int64_t words = hd::q4WordsPerRow(q.cols), groups = hd::q4NumGroups(q.cols, q.groupSize);
  std::vector<float> w(q.rows * q.cols);
  for (int64_t n = 0; n < q.rows; ++n)
    for (int64_t k = 0; k < q.cols; ++k)
      w[n * q.cols + k] = hd::q4Dequant(q.qweight.data() + n * words, q.scales.data() + n * groups,
                                        q.zeros.data() + n * groups, k, q.groupSize);
  return w;
}

} // namespace llmc::quant
