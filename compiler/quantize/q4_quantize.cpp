#include "quantize/q4_quantize.h"

#include "kernels/common/q4_layout.h"
#include "kernels/common/q4_rtn.h"

#include <algorithm>

namespace llmc::quant {

hd::Q4Code codeGroup(const float *w, int64_t count) {
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < count; ++i) {
    lo = std::min(lo, w[i]);
    hi = std::max(hi, w[i]);
  }
  return hd::q4CodeForRange(lo, hi);
}

namespace {

void quantizeRow(const float *w, int64_t cols, int64_t groupSize, uint32_t *words, uint16_t *scales,
                 uint16_t *zeros) {
  const int64_t wordsPerRow = hd::q4WordsPerRow(cols), groups = hd::q4NumGroups(cols, groupSize);
  std::fill(words, words + wordsPerRow, 0u);
  hd::Q4Code code{};
  for (int64_t g = 0; g < groups; ++g) {
    int64_t begin = g * groupSize, count = std::min(groupSize, cols - begin);
    code = codeGroup(w + begin, count);
    scales[g] = code.scale;
    zeros[g] = code.zero;
    for (int64_t k = begin; k < begin + count; ++k)
      words[k / 8] |= static_cast<uint32_t>(hd::q4QuantizeValue(w[k], code)) << (4 * (k % 8));
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
  hd::Q4Code code = codeGroup(w, count);
  for (int64_t i = 0; i < count; ++i)
    out[i] = (static_cast<float>(hd::q4QuantizeValue(w[i], code)) - code.zeroF) * code.scaleF;
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
