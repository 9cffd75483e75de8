#include "cpu/matmul_q4.h"

#include "cpu/isa.h"
#include "kernels/common/q4_layout.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace llmc::cpu {
namespace {

std::atomic<bool> &exactActivations() {
  static std::atomic<bool> exact{false};
  return exact;
}

using QuantizeFn = void (*)(const float *, int64_t, int64_t, int64_t, int64_t, int64_t, int8_t *,
                            float *, float *);
using RowsFn = void (*)(const detail::Q4Problem &, int64_t, int64_t);

// Chunks of whole 16-row blocks, with at least ~32 KiB of packed weights
// each so that small layers do not pay for waking the pool.
int64_t rowGrain(const Q4Matrix &w, int64_t tokens) {
  const int64_t rowBytes = hd::q4WordsPerRow(w.cols) * 4;
  const int64_t grain = (32 * 1024 / (rowBytes * tokens) + 15) / 16 * 16;
  return std::max<int64_t>(grain, 16);
}

// The panel decode kernel's chunks, each one stream: ~128 KiB or more
// (measured when the kernel still prefetched 32 KiB ahead in software: at
// 32 KiB chunks 110M int4 decode on 2 threads read 258-324 tok/s, at
// 64-256 KiB 281-371; Zen 4, docs/perf.md, sixteenth pass; with the
// hardware prefetcher alone, 32, 128 and 512 KiB read alike within this
// host's noise, 1B on 2 threads). As many chunks per thread, so that no
// thread waits for another's last one (an o_proj of 3 chunks on 2 threads;
// 110M decode on 2 threads 304 -> 312 tok/s, mean of 5 alternating runs).
int64_t streamGrain(const Q4Matrix &w, int64_t tokens, int64_t threads) {
  const int64_t rowBytes = hd::q4WordsPerRow(w.cols) * 4 * tokens;
  const int64_t perThread =
      std::max<int64_t>(1, w.rows * rowBytes / (int64_t{128} * 1024 * threads));
  const int64_t chunks = perThread * threads;
  return std::max<int64_t>(16, (w.rows + chunks - 1) / chunks + 15) / 16 * 16;
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

namespace {

// The zero point each f16 bit pattern stands for, or kNotAZero: one 64 KiB
// table lookup per zero instead of a conversion and three compares (a 1B
// int4 plan has 30 M zero points to pack at load).
constexpr uint8_t kNotAZero = 0xff;

const uint8_t *zeroOfHalf() {
  static const std::vector<uint8_t> table = [] {
    std::vector<uint8_t> t(65536, kNotAZero);
    for (int bits = 0; bits < 65536; ++bits) {
      const float z = hd::f16ToF32(static_cast<uint16_t>(bits));
      if (z >= 0.0f && z <= 15.0f && z == std::floor(z)) // NaN fails
        t[bits] = static_cast<uint8_t>(z);
    }
    return t;
  }();
  return table.data();
}

} // namespace

Status packQ4Zeros(ThreadPool &pool, const uint16_t *zeros, int64_t rows, int64_t groups,
                   uint8_t *out, std::string_view name) {
  const uint8_t *zeroOf = zeroOfHalf();
  const int64_t rowBytes = q4ZeroRowBytes(groups);
  std::atomic<int64_t> firstBad{rows * groups}; // the lowest bad cell, if any
  pool.parallelFor(
      rows,
      [&](int64_t begin, int64_t end) {
        for (int64_t n = begin; n < end; ++n) {
          uint8_t *packed = out + n * rowBytes;
          std::fill(packed, packed + rowBytes, uint8_t{0});
          for (int64_t g = 0; g < groups; ++g) {
            const uint8_t z = zeroOf[zeros[n * groups + g]];
            if (z == kNotAZero) {
              int64_t seen = firstBad.load();
              while (n * groups + g < seen && !firstBad.compare_exchange_weak(seen, n * groups + g))
                ;
              return;
            }
            packed[g / 2] |= static_cast<uint8_t>(z << (4 * (g % 2)));
          }
        }
      },
      std::max<int64_t>(1, 65536 / std::max<int64_t>(groups, 1)));
  const int64_t bad = firstBad.load();
  if (bad == rows * groups)
    return Status::ok();
  char value[32];
  std::snprintf(value, sizeof(value), "%g", static_cast<double>(hd::f16ToF32(zeros[bad])));
  return Status::error("int4 zero points '" + std::string(name) + "': row " +
                       std::to_string(bad / groups) + ", group " + std::to_string(bad % groups) +
                       " holds " + value +
                       "; int4 zero points must be integers 0 .. 15 (rebuild the plan with llmc)");
}

Expected<std::vector<uint8_t>> packQ4Zeros(const uint16_t *zeros, int64_t rows, int64_t groups,
                                           std::string_view name) {
  ThreadPool oneThread(1);
  std::vector<uint8_t> packed(rows * q4ZeroRowBytes(groups));
  LLMC_RETURN_IF_ERROR(packQ4Zeros(oneThread, zeros, rows, groups, packed.data(), name));
  return packed;
}

void setQ4ExactActivationsForTesting(bool exact) {
  exactActivations().store(exact, std::memory_order_relaxed);
}

void matmulQ4(ThreadPool &pool, const float *x, int64_t tokens, const Q4Matrix &w,
              const float *bias, float beta, float *y) {
  if (tokens <= 0)
    return;
  detail::Q4Problem problem{x, tokens, w, bias, beta, y, {}};
  const int64_t grain = rowGrain(w, tokens);
  if (exactActivations().load(std::memory_order_relaxed)) {
    pool.parallelFor(
        w.rows, [&](int64_t b, int64_t e) { detail::matmulQ4RowsExact(problem, b, e); }, grain);
    return;
  }
  QuantizeFn quantize = detail::quantizeQ8Scalar;
  RowsFn rows = detail::matmulQ4RowsScalar;
  int64_t lanes = 8;
  bool chunked = false; // the AVX2 kernel reads chunkScales
  bool streams = false; // the panel decode kernel, one prefetched stream per chunk
#if defined(__x86_64__)
  // AVX-512 machines too, for 2 to 9 tokens: the AVX2 kernel's row runs and
  // chunk scales ran 2x faster from DRAM on a Sapphire Rapids Xeon than an
  // earlier AVX-512 VNNI kernel (4 adjacent rows, vpdpbusd), and 1.2x at 64
  // tokens (docs/perf.md, "AVX-512 prefill GEMM"), which was removed.
  if (activeIsa() != Isa::Scalar) {
    quantize = detail::quantizeQ8Avx2;
    rows = detail::matmulQ4RowsAvx2;
    chunked = true;
  }
  // Decode on VNNI machines: the AVX2 kernel's row runs two rows per
  // 512-bit vector, 1.5x its compute rate and 1.1-1.2x from DRAM on a Zen 5
  // (docs/perf.md, "int4 decode two rows per vector"), with the same bits.
  if (x86VnniActive() && tokens == 1)
    rows = detail::matmulQ4RowsDecodeAvx512;
  // Prefill on VNNI machines: 512-bit vpdpbusd over 16-row panels (lanes =
  // rows) ran 1.2x the AVX2 tile on a Zen 5 at 16 tokens and 2.2-2.5x at
  // 64-512 (docs/perf.md, "int4 prefill panels"), with the same bits.
  if (x86VnniActive() && tokens >= detail::kQ4PanelMinTokens) {
    rows = detail::matmulQ4RowsPanelAvx512;
    chunked = false;
  } else if (x86VnniActive() && w.panels != nullptr) {
    rows = detail::matmulQ4RowsPanelNibblesAvx512;
    chunked = false;
    streams = true;
  }
#endif
#if defined(__aarch64__)
  if (activeIsa() == Isa::Neon)
    rows = detail::matmulQ4RowsNeon; // the scalar quantizer's layout, lanes 8
#endif
  // x quantized once per call, split over tokens for prefill.
  const int64_t pairs = detail::q8Pairs(w.cols), groups = hd::q4NumGroups(w.cols, w.groupSize);
  thread_local std::vector<int8_t> values;
  thread_local std::vector<float> scales, groupSums, chunkScales;
  values.resize(tokens * pairs * detail::kQ8PairBytes);
  scales.resize(tokens * pairs * lanes);
  groupSums.resize(tokens * groups);
  if (chunked)
    chunkScales.resize(tokens * detail::q8Chunks(w.cols) * 8);
  // Pointers, not the vectors: a worker naming a thread_local gets its own.
  problem.xq = {values.data(), scales.data(), groupSums.data(), pairs, lanes,
                chunked ? chunkScales.data() : nullptr};
  int8_t *valuesOut = values.data();
  float *scalesOut = scales.data(), *sumsOut = groupSums.data();
  float *chunksOut = chunked ? chunkScales.data() : nullptr;
  pool.parallelFor(
      tokens,
      [&](int64_t b, int64_t e) {
        quantize(x, w.cols, w.groupSize, lanes, b, e, valuesOut, scalesOut, sumsOut);
        if (chunksOut != nullptr)
          detail::chunkQ8Scales(scalesOut, pairs, b, e, chunksOut);
      },
      std::max<int64_t>(1, 16384 / w.cols));
  pool.parallelFor(
      w.rows, [&](int64_t b, int64_t e) { rows(problem, b, e); },
      streams ? streamGrain(w, tokens, pool.numThreads()) : grain);
}

namespace detail {

void chunkQ8Scales(const float *scales, int64_t pairs, int64_t tokenBegin, int64_t tokenEnd,
                   float *chunkScales) {
  const int64_t chunks = (pairs + kQ8ChunkPairs - 1) / kQ8ChunkPairs;
  for (int64_t t = tokenBegin; t < tokenEnd; ++t) {
    const float *s = scales + t * pairs * 8;
    float *out = chunkScales + t * chunks * 8;
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t i = 0; i < kQ8ChunkPairs; ++i) {
        const int64_t q = kQ8ChunkPairs * c + i;
        out[8 * c + i] = q < pairs ? s[8 * q] : 0.0f;
        out[8 * c + 4 + i] = q < pairs ? s[8 * q + 4] : 0.0f;
      }
  }
}

// The reference quantizer; quantizeQ8Avx2 gives the same bytes and floats.
void quantizeQ8Scalar(const float *x, int64_t cols, int64_t groupSize, int64_t scaleLanes,
                      int64_t tokenBegin, int64_t tokenEnd, int8_t *values, float *scales,
                      float *groupSums) {
  const int64_t pairs = q8Pairs(cols), groups = hd::q4NumGroups(cols, groupSize);
  for (int64_t t = tokenBegin; t < tokenEnd; ++t) {
    const float *row = x + t * cols;
    int8_t *v = values + t * pairs * kQ8PairBytes;
    float *s = scales + t * pairs * scaleLanes;
    float *sums = groupSums + t * groups;
    std::fill(sums, sums + groups, 0.0f);
    for (int64_t b = 0; b < 2 * pairs; ++b) {
      const int64_t c0 = b * kQ8Block;
      const int64_t n = std::clamp<int64_t>(cols - c0, 0, kQ8Block);
      // NaN or Inf anywhere in the block: d = NaN, so the outputs it feeds are NaN.
      float amax = 0.0f, poison = 0.0f;
      for (int64_t i = 0; i < n; ++i) {
        amax = std::max(amax, std::fabs(row[c0 + i]));
        poison += row[c0 + i] * 0.0f;
      }
      const bool finite = !std::isnan(poison);
      const float d = finite ? amax / 127.0f : NAN;
      const float inv = finite && amax > 0.0f ? 127.0f / amax : 0.0f;
      int8_t *pair = v + (b / 2) * kQ8PairBytes + 16 * (b % 2);
      int32_t sum = 0;
      for (int64_t i = 0; i < kQ8Block; ++i) {
        // A non-finite block stores zeros (converting NaN to int is undefined); d is NaN.
        const int32_t q =
            i < n && finite ? static_cast<int32_t>(std::nearbyint(row[c0 + i] * inv)) : 0;
        pair[32 * (i % 2) + i / 2] = static_cast<int8_t>(q);
        sum += q;
      }
      float *lanes = s + (b / 2) * scaleLanes + 4 * (b % 2);
      for (int64_t l = 0; l < scaleLanes; l += 8)
        std::fill(lanes + l, lanes + l + 4, n > 0 ? d : 0.0f);
      if (n > 0)
        sums[c0 / groupSize] += d * static_cast<float>(sum);
    }
  }
}

// The Q8 numerics of matmul_q4.h, one row and token at a time.
void matmulQ4RowsScalar(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  const int64_t words = hd::q4WordsPerRow(p.w.cols), g = p.w.groupSize;
  const int64_t groups = hd::q4NumGroups(p.w.cols, g), blocks = words / 4;
  const Q8Activations &xq = p.xq;
  for (int64_t n = rowBegin; n < rowEnd; ++n) {
    const hd::u32 *packed = p.w.qweight + n * words;
    const uint16_t *scales = p.w.scales + n * groups;
    const uint8_t *zeros = p.w.zeros + n * q4ZeroRowBytes(groups);
    for (int64_t t = 0; t < p.tokens; ++t) {
      const int8_t *v = xq.values + t * xq.pairs * kQ8PairBytes;
      const float *d = xq.scales + t * xq.pairs * xq.scaleLanes;
      const float *sums = xq.groupSums + t * groups;
      float total = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        const int8_t *pair = v + (b / 2) * kQ8PairBytes + 16 * (b % 2);
        int32_t dot = 0;
        for (int64_t i = 0; i < kQ8Block; ++i)
          dot += hd::q4At(packed, b * kQ8Block + i) * pair[32 * (i % 2) + i / 2];
        const float blockScale = d[(b / 2) * xq.scaleLanes + 4 * (b % 2)];
        total += hd::f16ToF32(scales[b * kQ8Block / g]) * (blockScale * static_cast<float>(dot));
      }
      for (int64_t k = 0; k < groups; ++k)
        total -= hd::f16ToF32(scales[k]) * static_cast<float>(q4ZeroAt(zeros, k)) * sums[k];
      storeQ4Output(p, t, n, total);
    }
  }
}

// Each row dequantized to f32 once, then dotted with every token of f32 x.
void matmulQ4RowsExact(const Q4Problem &p, int64_t rowBegin, int64_t rowEnd) {
  const int64_t k = p.w.cols, words = hd::q4WordsPerRow(k);
  const int64_t groups = hd::q4NumGroups(k, p.w.groupSize);
  thread_local std::vector<float> row;
  row.resize(k);
  for (int64_t n = rowBegin; n < rowEnd; ++n) {
    const hd::u32 *packed = p.w.qweight + n * words;
    const uint16_t *scales = p.w.scales + n * groups;
    const uint8_t *zeros = p.w.zeros + n * q4ZeroRowBytes(groups);
    for (int64_t c = 0; c < k; ++c) { // hd::q4Dequant's arithmetic
      const int64_t g = c / p.w.groupSize;
      row[c] = (static_cast<float>(hd::q4At(packed, c)) - static_cast<float>(q4ZeroAt(zeros, g))) *
               hd::f16ToF32(scales[g]);
    }
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
