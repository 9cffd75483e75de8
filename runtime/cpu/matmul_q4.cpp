#include "cpu/matmul_q4.h"

#include "cpu/isa.h"
#include "kernels/common/q4_layout.h"

#include <string>
#include <vector>

namespace llmc::cpu {
namespace {

// Tokens up to which the AVX2 path streams packed rows (decode); above, it
// dequantizes row blocks once and reuses them for every token (prefill).
constexpr int64_t kDecodeMaxTokens = 2;

// x rearranged for the decode path: per block of 8 * lanes columns, nibble
// plane i (columns 8j + i, j < lanes) at offset lanes * i, zero beyond K;
// and the sum of x over each group's columns, so that zero points apply
// once per group.
void prepareDecodeInputs(const float *x, int64_t tokens, const Q4Matrix &w, int64_t lanes,
                         int64_t blocks, std::vector<float> &planes,
                         std::vector<float> &groupSums) {
  const int64_t k = w.cols, groups = hd::q4NumGroups(k, w.groupSize), width = 8 * lanes;
  planes.assign(tokens * blocks * width, 0.0f);
  groupSums.assign(tokens * groups, 0.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    const float *row = x + t * k;
    float *plane = planes.data() + t * blocks * width;
    float *sums = groupSums.data() + t * groups;
    for (int64_t c = 0; c < k; ++c) {
      int64_t word = c / 8, nibble = c % 8;
      plane[(word / lanes) * width + nibble * lanes + word % lanes] = row[c];
      sums[c / w.groupSize] += row[c];
    }
  }
}

} // namespace

Status checkWeight(const Q4Matrix &w, std::string_view name) {
  std::string where = "int4 weight '" + std::string(name) + "'";
  if (w.qweight == nullptr || w.scales == nullptr || w.zeros == nullptr)
    return Status::error(where + ": no data");
  if (w.rows <= 0 || w.cols <= 0)
    return Status::error(where + ": shape [" + std::to_string(w.rows) + ", " +
                         std::to_string(w.cols) + "] must have positive dimensions");
  if (!hd::q4ValidGroupSize(w.groupSize))
    return Status::error(where + ": group size " + std::to_string(w.groupSize) +
                         " is not a positive multiple of 32");
  return Status::ok();
}

void matmulQ4(ThreadPool &pool, const float *x, int64_t tokens, const Q4Matrix &w,
              const float *bias, float beta, float *y) {
  if (tokens <= 0)
    return;
  detail::Q4Problem problem{x, tokens, w, bias, beta, y, nullptr, nullptr, 0};
  void (*rows)(const detail::Q4Problem &, int64_t, int64_t) = detail::matmulQ4RowsScalar;
  int64_t lanes = 0; // of the decode path's vectors; 0: no decode path
#if defined(__x86_64__)
  if (activeIsa() != Isa::Scalar) {
    rows = detail::matmulQ4RowsAvx2;
    lanes = 8;
  }
  // The AVX-512 kernel needs one group pattern for every block: G | 128 or 128 | G.
  if (activeIsa() == Isa::Avx512 && tokens <= kDecodeMaxTokens &&
      (128 % w.groupSize == 0 || w.groupSize % 128 == 0)) {
    rows = detail::matmulQ4DecodeAvx512;
    lanes = 16;
  }
#endif
  thread_local std::vector<float> planes, groupSums;
  if (lanes > 0 && tokens <= kDecodeMaxTokens) {
    problem.blocks = (w.cols + 8 * lanes - 1) / (8 * lanes);
    prepareDecodeInputs(x, tokens, w, lanes, problem.blocks, planes, groupSums);
    problem.xPlanes = planes.data();
    problem.xGroupSums = groupSums.data();
  }
  // Chunks of whole 16-row blocks, with at least ~32 KiB of packed weights
  // each so that small layers do not pay for waking the pool.
  const int64_t rowBytes = hd::q4WordsPerRow(w.cols) * 4;
  int64_t grain = (32 * 1024 / (rowBytes * tokens) + 15) / 16 * 16;
  pool.parallelFor(
      w.rows, [&](int64_t begin, int64_t end) { rows(problem, begin, end); },
      grain < 16 ? 16 : grain);
}

namespace detail {

// The reference path: dequantize each row to f32 once, then dot it with
// every token.
void matmulQ4RowsScalar(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  const int64_t k = p.w.cols, words = hd::q4WordsPerRow(k);
  const int64_t groups = hd::q4NumGroups(k, p.w.groupSize);
  thread_local std::vector<float> row;
  row.resize(k);
  for (int64_t n = rowBegin; n < rowEnd; ++n) {
    const hd::u32 *packed = p.w.qweight + n * words;
    for (int64_t c = 0; c < k; ++c)
      row[c] =
          hd::q4Dequant(packed, p.w.scales + n * groups, p.w.zeros + n * groups, c, p.w.groupSize);
    for (int64_t t = 0; t < p.tokens; ++t) {
      const float *xt = p.x + t * k;
      float s[4] = {0, 0, 0, 0};
      int64_t c = 0;
      for (; c + 4 <= k; c += 4)
        for (int j = 0; j < 4; ++j)
          s[j] += row[c + j] * xt[c + j];
      for (; c < k; ++c)
        s[0] += row[c] * xt[c];
      storeQ4Output(p, t, n, (s[0] + s[1]) + (s[2] + s[3]));
    }
  }
}

} // namespace detail
} // namespace llmc::cpu
