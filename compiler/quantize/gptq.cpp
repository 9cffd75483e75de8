#include "quantize/gptq.h"

#include "kernels/common/q4_layout.h"
#include "kernels/common/q4_rtn.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace llmc::quant {
namespace {

// sum a[i] * b[i] in double (a of doubles or floats), four accumulators
// (no fast-math here to reassociate).
template <typename A> double dot(const A *a, const double *b, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += double(a[i]) * b[i];
    s1 += double(a[i + 1]) * b[i + 1];
    s2 += double(a[i + 2]) * b[i + 2];
    s3 += double(a[i + 3]) * b[i + 3];
  }
  for (; i < n; ++i)
    s0 += double(a[i]) * b[i];
  return (s0 + s1) + (s2 + s3);
}

// In place: the lower Cholesky factor L of a [n, n] (a = L L^T; the upper
// triangle is left as it was). False when a pivot is not positive.
bool choleskyLower(ThreadPool &pool, std::vector<double> &a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double *rowJ = a.data() + j * n;
    const double pivot = rowJ[j] - dot(rowJ, rowJ, j);
    if (!(pivot > 0.0))
      return false;
    const double d = std::sqrt(pivot);
    rowJ[j] = d;
    pool.parallelFor(
        n - j - 1,
        [&](int64_t begin, int64_t end) {
          for (int64_t i = j + 1 + begin; i < j + 1 + end; ++i) {
            double *rowI = a.data() + i * n;
            rowI[j] = (rowI[j] - dot(rowI, rowJ, j)) / d;
          }
        },
        std::max<int64_t>(1, 16384 / std::max<int64_t>(1, j)));
  }
  return true;
}

// x = l^-1 for the lower triangular l [n, n] (its upper triangle ignored):
// forward substitution on the identity, row by row; the columns are
// independent, so they are split over the pool.
std::vector<double> invertLower(ThreadPool &pool, const std::vector<double> &l, int64_t n) {
  std::vector<double> x(n * n, 0.0);
  pool.parallelFor(
      n,
      [&](int64_t c0, int64_t c1) {
        for (int64_t i = c0; i < n; ++i) {
          double *xi = x.data() + i * n;
          const double *li = l.data() + i * n;
          // x[i][c] = (delta(i, c) - sum_{c <= k < i} l[i][k] x[k][c]) / l[i][i]
          for (int64_t k = c0; k < i; ++k) {
            const double f = li[k];
            const double *xk = x.data() + k * n;
            const int64_t end = std::min(c1, k + 1);
            for (int64_t c = c0; c < end; ++c)
              xi[c] -= f * xk[c];
          }
          if (i < c1)
            xi[i] += 1.0;
          const double inv = 1.0 / li[i];
          for (int64_t c = c0; c < std::min(c1, i + 1); ++c)
            xi[c] *= inv;
        }
      },
      16);
  return x;
}

// The column order: identity, or (act-order) decreasing H[k][k], ties by index.
std::vector<int64_t> columnOrder(const std::vector<float> &hessian, int64_t cols, bool actOrder) {
  std::vector<int64_t> order(cols);
  std::iota(order.begin(), order.end(), 0);
  if (actOrder)
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return hessian[a * cols + a] > hessian[b * cols + b];
    });
  return order;
}

// The coding of one group w[0 .. count): with the range search (GPTQ's
// quantizer with mse, norm 2.4, max shrink 0.8), the range [p lo, p hi],
// p = 1 - i / 100 for i < 20, whose values have the smallest
// sum |w - dequant(q(w))|^2.4; else q4_rtn.h's range.
hd::Q4Code groupCode(const float *w, int64_t count, bool rangeSearch) {
  hd::Q4Code best = codeGroup(w, count);
  if (!rangeSearch)
    return best;
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < count; ++i) {
    lo = std::min(lo, w[i]);
    hi = std::max(hi, w[i]);
  }
  double bestErr = std::numeric_limits<double>::max();
  for (int i = 0; i < 20; ++i) {
    const float p = 1.0f - static_cast<float>(i) / 100.0f;
    const hd::Q4Code c = hd::q4CodeForRange(p * lo, p * hi);
    double err = 0;
    for (int64_t k = 0; k < count; ++k) {
      const float q = (static_cast<float>(hd::q4QuantizeValue(w[k], c)) - c.zeroF) * c.scaleF;
      err += std::pow(std::fabs(static_cast<double>(q) - w[k]), 2.4);
    }
    if (err < bestErr) {
      bestErr = err;
      best = c;
    }
  }
  return best;
}

// One tile of rows through GPTQ: w [tileRows, cols] in permuted column order
// (updated in place), u [cols, cols] the factor in that order. Writes the
// stored values 0..15 into q [tileRows, cols] (original column order) and
// the codings into codes [tileRows, groups] (already filled with act-order).
struct TileJob {
  const std::vector<float> &u;
  const std::vector<int64_t> &order;
  int64_t cols, groupSize, groups, blockSize;
  bool staticGroups, rangeSearch;
};

void quantizeTile(const TileJob &job, float *w, int64_t tileRows, hd::Q4Code *codes, uint8_t *q) {
  const int64_t cols = job.cols, bs = job.blockSize;
  std::vector<float> err(tileRows * bs);
  for (int64_t b0 = 0; b0 < cols; b0 += bs) {
    const int64_t b1 = std::min(cols, b0 + bs);
    for (int64_t j = b0; j < b1; ++j) {
      const int64_t column = job.order[j], group = column / job.groupSize;
      const float *uj = job.u.data() + j * cols;
      for (int64_t r = 0; r < tileRows; ++r) {
        float *wr = w + r * cols;
        hd::Q4Code &code = codes[r * job.groups + group];
        if (!job.staticGroups && j % job.groupSize == 0)
          code = groupCode(wr + j, std::min(job.groupSize, cols - j), job.rangeSearch);
        const int32_t value = hd::q4QuantizeValue(wr[j], code);
        q[r * cols + column] = static_cast<uint8_t>(value);
        const float dequantized = (static_cast<float>(value) - code.zeroF) * code.scaleF;
        const float e = (wr[j] - dequantized) / uj[j];
        err[r * bs + (j - b0)] = e;
        for (int64_t k = j + 1; k < b1; ++k)
          wr[k] -= e * uj[k];
      }
    }
    // The lazy batch: the block's errors onto every later column, each row
    // of U read once for the tile.
    for (int64_t j = b0; j < b1; ++j) {
      const float *uj = job.u.data() + j * cols;
      for (int64_t r = 0; r < tileRows; ++r) {
        const float e = err[r * bs + (j - b0)];
        float *wr = w + r * cols;
        for (int64_t k = b1; k < cols; ++k)
          wr[k] -= e * uj[k];
      }
    }
  }
}

// One row's stored values and codings in the plan layout (q4_quantize.cpp's
// rule: pad nibbles hold the last group's zero point).
void packRow(const uint8_t *q, const hd::Q4Code *codes, int64_t cols, int64_t groups,
             uint32_t *words, uint16_t *scales, uint16_t *zeros) {
  const int64_t wordsPerRow = hd::q4WordsPerRow(cols);
  std::fill(words, words + wordsPerRow, 0u);
  for (int64_t k = 0; k < cols; ++k)
    words[k / 8] |= static_cast<uint32_t>(q[k]) << (4 * (k % 8));
  for (int64_t k = cols; k < wordsPerRow * 8; ++k)
    words[k / 8] |= static_cast<uint32_t>(codes[groups - 1].zeroF) << (4 * (k % 8));
  for (int64_t g = 0; g < groups; ++g) {
    scales[g] = codes[g].scale;
    zeros[g] = codes[g].zero;
  }
}

// The scale refit (gptq.h) of a tile of rows: w [count, cols] their
// original weights, q [count, cols] their stored values 0..15, codes
// [count, groups] their codings (scales updated in place), h [cols, cols]
// the dampened Hessian. Per row, with e = w - d its error and t = q - zero
// on group g, moving g's scale by delta changes e^T H e by
// -2 delta t^T (H e)_g + delta^2 t^T H_gg t: the best delta is
// t^T (H e)_g / t^T H_gg t, kept when its f16 rounding still gains. The
// rows of a tile share each pass over h (H e of every row, then each
// group's update of it), so h is read from memory once per tile.
void refitTile(const float *w, const uint8_t *q, hd::Q4Code *codes, int64_t count, int64_t cols,
               int64_t groupSize, const std::vector<float> &h) {
  const int64_t groups = hd::q4NumGroups(cols, groupSize);
  std::vector<double> e(count * cols), he(count * cols), t(groupSize), steps(count * groupSize);
  for (int64_t r = 0; r < count; ++r)
    for (int64_t k = 0; k < cols; ++k) {
      const hd::Q4Code &c = codes[r * groups + k / groupSize];
      e[r * cols + k] =
          static_cast<double>(w[r * cols + k]) -
          static_cast<double>((static_cast<float>(q[r * cols + k]) - c.zeroF) * c.scaleF);
    }
  for (int64_t i = 0; i < cols; ++i)
    for (int64_t r = 0; r < count; ++r)
      he[r * cols + i] = dot(h.data() + i * cols, e.data() + r * cols, cols);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t c0 = g * groupSize, n = std::min(groupSize, cols - c0);
    std::fill(steps.begin(), steps.end(), 0.0);
    for (int64_t r = 0; r < count; ++r) {
      hd::Q4Code &code = codes[r * groups + g];
      const uint8_t *qr = q + r * cols + c0;
      double tHe = 0, tHt = 0;
      for (int64_t k = 0; k < n; ++k)
        t[k] = static_cast<double>(qr[k]) - code.zeroF;
      for (int64_t k = 0; k < n; ++k) {
        tHe += t[k] * he[r * cols + c0 + k];
        tHt += t[k] * dot(h.data() + (c0 + k) * cols + c0, t.data(), n);
      }
      if (!(tHt > 0.0))
        continue;
      const double best = code.scaleF + tHe / tHt;
      if (!(best > 0.0))
        continue; // positive scales only: the coding's order of values stays
      const uint16_t bits = hd::f32ToF16(static_cast<float>(best));
      const float rounded = hd::f16ToF32(bits);
      const double delta = static_cast<double>(rounded) - code.scaleF;
      if (!(rounded > 0.0f) || !std::isfinite(rounded) ||
          !(2 * delta * tHe - delta * delta * tHt > 0))
        continue;
      code.scale = bits;
      code.scaleF = rounded;
      for (int64_t k = 0; k < n; ++k)
        steps[r * groupSize + k] = delta * t[k];
    }
    for (int64_t k = 0; k < n; ++k) {
      const float *hk = h.data() + (c0 + k) * cols; // H symmetric: column c0 + k
      for (int64_t r = 0; r < count; ++r) {
        const double step = steps[r * groupSize + k];
        if (step == 0.0)
          continue;
        double *her = he.data() + r * cols;
        for (int64_t i = 0; i < cols; ++i)
          her[i] -= step * hk[i];
      }
    }
  }
}

} // namespace

Expected<std::vector<double>> inverseHessianFactor(ThreadPool &pool, std::vector<double> hessian,
                                                   int64_t n, double dampening) {
  if (static_cast<int64_t>(hessian.size()) != n * n)
    return Status::error("GPTQ: Hessian of " + std::to_string(hessian.size()) + " values for " +
                         std::to_string(n) + " columns");
  double mean = 0;
  for (int64_t i = 0; i < n; ++i)
    mean += hessian[i * n + i];
  mean /= std::max<int64_t>(1, n);
  if (!(mean > 0.0))
    return Status::error("GPTQ: the Hessian's diagonal is not positive (mean " +
                         std::to_string(mean) + "); were the calibration inputs all zero?");
  // U = J M^-1 J with M the lower factor of J (H + damp I) J (J reverses the
  // order): U is upper and U^T U = J (M M^T)^-1 J = (H + damp I)^-1, one
  // factorization and one triangular inverse instead of two of each.
  for (double damp = dampening; damp <= dampening * 1000.0 * 1.5; damp *= 10.0) {
    std::vector<double> a(n * n);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j <= i; ++j)
        a[i * n + j] = hessian[(n - 1 - i) * n + (n - 1 - j)] + (i == j ? damp * mean : 0.0);
    if (!choleskyLower(pool, a, n))
      continue;
    for (int64_t i = 0; i < n; ++i)
      std::fill(a.begin() + i * n + i + 1, a.begin() + (i + 1) * n, 0.0);
    std::vector<double> x = invertLower(pool, a, n);
    std::vector<double> u(n * n);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        u[i * n + j] = x[(n - 1 - i) * n + (n - 1 - j)];
    return u;
  }
  return Status::error("GPTQ: the Hessian is not positive definite even with " +
                       std::to_string(dampening * 1000.0) +
                       " of its mean diagonal added; the calibration inputs may hold NaN");
}

Expected<Q4Tensor> gptqQuantize(ThreadPool &pool, const float *w, int64_t rows, int64_t cols,
                                const std::vector<float> &hessian, const GptqOptions &options) {
  if (static_cast<int64_t>(hessian.size()) != cols * cols)
    return Status::error("GPTQ: Hessian of " + std::to_string(hessian.size()) + " values, " +
                         std::to_string(cols) + "^2 expected");
  if (options.groupSize <= 0)
    return Status::error("GPTQ: group size " + std::to_string(options.groupSize));
  const int64_t groupSize = options.groupSize, groups = hd::q4NumGroups(cols, groupSize);
  const std::vector<int64_t> order = columnOrder(hessian, cols, options.actOrder);
  // Inputs that were always 0: any value is exact; make them 0 (and H's
  // diagonal 1, so that H stays invertible).
  std::vector<bool> dead(cols);
  for (int64_t k = 0; k < cols; ++k)
    dead[k] = !(hessian[k * cols + k] > 0.0f);
  std::vector<double> permuted(cols * cols);
  for (int64_t i = 0; i < cols; ++i)
    for (int64_t j = 0; j < cols; ++j)
      permuted[i * cols + j] = i == j && dead[order[i]]
                                   ? 1.0
                                   : static_cast<double>(hessian[order[i] * cols + order[j]]);
  LLMC_ASSIGN_OR_RETURN(std::vector<double> u64,
                        inverseHessianFactor(pool, std::move(permuted), cols, options.dampening));
  const std::vector<float> u(u64.begin(), u64.end());
  u64 = {};
  // The refit's H + damp I, in the original column order (dead inputs: 1).
  std::vector<float> dampened;
  if (options.refitScales) {
    double mean = 0;
    for (int64_t k = 0; k < cols; ++k)
      mean += dead[k] ? 1.0 : hessian[k * cols + k];
    mean /= static_cast<double>(cols);
    dampened.assign(hessian.begin(), hessian.end());
    for (int64_t k = 0; k < cols; ++k)
      dampened[k * cols + k] = static_cast<float>(
          (dead[k] ? 1.0 : hessian[k * cols + k]) + options.dampening * mean);
  }

  std::vector<float> source(w, w + rows * cols);
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t k = 0; k < cols; ++k)
      if (dead[k])
        source[n * cols + k] = 0.0f;
  std::vector<hd::Q4Code> codes(rows * groups);
  if (options.actOrder) // static groups, from the unquantized weights
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t g = 0; g < groups; ++g)
        codes[n * groups + g] = groupCode(source.data() + n * cols + g * groupSize,
                                          std::min(groupSize, cols - g * groupSize),
                                          options.rangeSearch);
  const int64_t blockSize = groupSize * std::max<int64_t>(1, options.blockSize / groupSize);
  TileJob job{u,      order,           cols, groupSize, groups, blockSize, options.actOrder,
              options.rangeSearch};

  Q4Tensor out;
  out.rows = rows;
  out.cols = cols;
  out.groupSize = groupSize;
  const int64_t words = hd::q4WordsPerRow(cols);
  out.qweight.resize(rows * words);
  out.scales.resize(rows * groups);
  out.zeros.resize(rows * groups);
  constexpr int64_t kTileRows = 8;
  const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
  pool.parallelFor(tiles, [&](int64_t t0, int64_t t1) {
    std::vector<float> tile(kTileRows * cols);
    std::vector<uint8_t> q(kTileRows * cols);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r0 = t * kTileRows, count = std::min(kTileRows, rows - r0);
      for (int64_t r = 0; r < count; ++r)
        for (int64_t j = 0; j < cols; ++j)
          tile[r * cols + j] = source[(r0 + r) * cols + order[j]];
      quantizeTile(job, tile.data(), count, codes.data() + r0 * groups, q.data());
      if (options.refitScales)
        refitTile(source.data() + r0 * cols, q.data(), codes.data() + r0 * groups, count, cols,
                  groupSize, dampened);
      for (int64_t r = 0; r < count; ++r)
        packRow(q.data() + r * cols, codes.data() + (r0 + r) * groups, cols, groups,
                out.qweight.data() + (r0 + r) * words, out.scales.data() + (r0 + r) * groups,
                out.zeros.data() + (r0 + r) * groups);
    }
  });
  return out;
}

} // namespace llmc::quant
