// AVX2 + FMA inner loops of the paged attention (attention_kernels.h).
#if defined(__x86_64__)

#include "cpu/attention_exp_avx2.h"
#include "cpu/attention_kernels.h"
#include "cpu/lanes_avx2.h"
#include "kernels/common/attention_scores.h"

#include <algorithm>
#include <cmath>
#include <immintrin.h>

#define LLMC_ATTN_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace llmc::cpu::detail {
namespace {

// 8 lanes of keys or values: an f32 cache's as they are, an f16 cache's
// widened (exact), so both give the kernels the same floats.
LLMC_ATTN_AVX2 inline __m256 loadLanes(const float *p) { return _mm256_loadu_ps(p); }
LLMC_ATTN_AVX2 inline __m256 loadLanes(const uint16_t *p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
}

// The largest of 8 lanes (max is exact: the order does not matter).
LLMC_ATTN_AVX2 inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// {hsum(a), hsum(b), hsum(c), hsum(d)} with hsum's additions in hsum's
// order (its bits), four vectors' steps side by side: lanes i + (i + 4),
// then (0 + 2) and (1 + 3), then the two.
LLMC_ATTN_AVX2 inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ac = _mm256_add_ps(_mm256_permute2f128_ps(a, c, 0x20),
                                  _mm256_permute2f128_ps(a, c, 0x31)); // a's 4 | c's 4
  const __m256 bd = _mm256_add_ps(_mm256_permute2f128_ps(b, d, 0x20),
                                  _mm256_permute2f128_ps(b, d, 0x31));
  const __m256 pairs = _mm256_add_ps(_mm256_shuffle_ps(ac, bd, _MM_SHUFFLE(1, 0, 1, 0)),
                                     _mm256_shuffle_ps(ac, bd, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 sums = _mm256_hadd_ps(pairs, pairs); // a b a b | c d c d
  return _mm_shuffle_ps(_mm256_castps256_ps128(sums), _mm256_extractf128_ps(sums, 1),
                        _MM_SHUFFLE(1, 0, 1, 0));
}

// The dot products of QUERIES queries (rows of qStride floats) with KEYS
// keys, each summed as dotAvx2 (simd_avx2.cpp) sums it: columns 16i .. 16i
// + 7 into acc0, 16i + 8 .. 16i + 15 into acc1, a last 8 into acc0, then
// hsum(acc0 + acc1) (dim is a multiple of 8). A key's chunk is loaded once
// for all the queries; a (query, key) pair's bits do not depend on QUERIES
// or KEYS. QUERIES x KEYS is 1 x 4, 2 x 2 (hsum4 of the four pairs) or Q x 1;
// the pair (n, k) goes to out[n * outStride + k * outKey].
template <int QUERIES, int KEYS, typename Key>
LLMC_ATTN_AVX2 inline void dots(const float *q, int64_t qStride, const Key *keys, int64_t stride,
                                int64_t dim, float *out, int64_t outStride, int64_t outKey = 1) {
  __m256 acc0[QUERIES][KEYS], acc1[QUERIES][KEYS];
#pragma GCC unroll 4
  for (int n = 0; n < QUERIES; ++n)
#pragma GCC unroll 4
    for (int k = 0; k < KEYS; ++k)
      acc0[n][k] = acc1[n][k] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= dim; i += 16) {
    __m256 qa[QUERIES], qb[QUERIES];
#pragma GCC unroll 4
    for (int n = 0; n < QUERIES; ++n) {
      qa[n] = _mm256_loadu_ps(q + n * qStride + i);
      qb[n] = _mm256_loadu_ps(q + n * qStride + i + 8);
    }
#pragma GCC unroll 4
    for (int k = 0; k < KEYS; ++k) {
      const __m256 ka = loadLanes(keys + k * stride + i);
      const __m256 kb = loadLanes(keys + k * stride + i + 8);
#pragma GCC unroll 4
      for (int n = 0; n < QUERIES; ++n) {
        acc0[n][k] = _mm256_fmadd_ps(qa[n], ka, acc0[n][k]);
        acc1[n][k] = _mm256_fmadd_ps(qb[n], kb, acc1[n][k]);
      }
    }
  }
  if (i + 8 <= dim) {
#pragma GCC unroll 4
    for (int k = 0; k < KEYS; ++k) {
      const __m256 ka = loadLanes(keys + k * stride + i);
#pragma GCC unroll 4
      for (int n = 0; n < QUERIES; ++n)
        acc0[n][k] = _mm256_fmadd_ps(_mm256_loadu_ps(q + n * qStride + i), ka, acc0[n][k]);
    }
  }
  if constexpr (QUERIES == 1 && KEYS == 4) { // a row of the one-query layout (outKey 1)
    _mm_storeu_ps(out, hsum4(_mm256_add_ps(acc0[0][0], acc1[0][0]),
                             _mm256_add_ps(acc0[0][1], acc1[0][1]),
                             _mm256_add_ps(acc0[0][2], acc1[0][2]),
                             _mm256_add_ps(acc0[0][3], acc1[0][3])));
  } else if constexpr (QUERIES == 2 && KEYS == 2) {
    alignas(16) float sums[4];
    _mm_store_ps(sums, hsum4(_mm256_add_ps(acc0[0][0], acc1[0][0]),
                             _mm256_add_ps(acc0[0][1], acc1[0][1]),
                             _mm256_add_ps(acc0[1][0], acc1[1][0]),
                             _mm256_add_ps(acc0[1][1], acc1[1][1])));
    out[0] = sums[0];
    out[outKey] = sums[1];
    out[outStride] = sums[2];
    out[outStride + outKey] = sums[3];
  } else if constexpr (QUERIES == 3 && KEYS == 2) {
    alignas(16) float sums[8];
    _mm_store_ps(sums, hsum4(_mm256_add_ps(acc0[0][0], acc1[0][0]),
                             _mm256_add_ps(acc0[0][1], acc1[0][1]),
                             _mm256_add_ps(acc0[1][0], acc1[1][0]),
                             _mm256_add_ps(acc0[1][1], acc1[1][1])));
    const __m256 last0 = _mm256_add_ps(acc0[2][0], acc1[2][0]),
                 last1 = _mm256_add_ps(acc0[2][1], acc1[2][1]);
    _mm_store_ps(sums + 4, hsum4(last0, last1, last0, last1));
    for (int n = 0; n < 3; ++n) {
      out[n * outStride] = sums[2 * n];
      out[n * outStride + outKey] = sums[2 * n + 1];
    }
  } else {
    static_assert(KEYS == 1);
#pragma GCC unroll 4
    for (int n = 0; n < QUERIES; ++n)
      out[n * outStride] = hsum(_mm256_add_ps(acc0[n][0], acc1[n][0]));
  }
}

// acc[0 .. 8 * V) of the accumulate for QUERIES queries (accumulators and
// weights rows of accStride and weightStride floats), query n over its own
// first counts[n] positions of the block, the QUERIES x V vectors in
// registers over the block and each value chunk loaded once for all of
// them. Every feature's sum is its own and runs over j = 0, 1, ... in order:
// the bits of a query's feature do not depend on QUERIES, V or the other
// queries' counts.
template <int QUERIES, int V, typename Value>
LLMC_ATTN_AVX2 inline void accumulate(float *acc, int64_t accStride, const float *accScale,
                                      const float *weights, int64_t weightStride,
                                      const Value *values, int64_t stride, const int64_t *counts,
                                      int64_t weightKey = 1) {
  __m256 a[QUERIES][V];
  int64_t common = counts[0], longest = counts[0];
#pragma GCC unroll 4
  for (int n = 0; n < QUERIES; ++n) {
    common = std::min(common, counts[n]);
    longest = std::max(longest, counts[n]);
    const __m256 first = _mm256_set1_ps(accScale[n]);
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) // x * 1 is x: skipping the multiply changes no bit
      a[n][v] = accScale[n] == 1.0f ? _mm256_loadu_ps(acc + n * accStride + 8 * v)
                                    : _mm256_mul_ps(first, _mm256_loadu_ps(acc + n * accStride + 8 * v));
  }
  for (int64_t j = 0; j < common; ++j) {
    __m256 w[QUERIES];
#pragma GCC unroll 4
    for (int n = 0; n < QUERIES; ++n)
      w[n] = _mm256_set1_ps(weights[n * weightStride + j * weightKey]);
    const Value *row = values + j * stride;
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      const __m256 x = loadLanes(row + 8 * v);
#pragma GCC unroll 4
      for (int n = 0; n < QUERIES; ++n)
        a[n][v] = _mm256_fmadd_ps(w[n], x, a[n][v]);
    }
  }
  // The rest of the longer queries' parts (a diagonal block of a prefill).
  for (int64_t j = common; j < longest; ++j) {
    const Value *row = values + j * stride;
#pragma GCC unroll 4
    for (int n = 0; n < QUERIES; ++n) {
      if (j >= counts[n])
        continue;
      const __m256 w = _mm256_set1_ps(weights[n * weightStride + j * weightKey]);
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v)
        a[n][v] = _mm256_fmadd_ps(w, loadLanes(row + 8 * v), a[n][v]);
    }
  }
#pragma GCC unroll 4
  for (int n = 0; n < QUERIES; ++n)
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v)
      _mm256_storeu_ps(acc + n * accStride + 8 * v, a[n][v]);
}

// The queries that the column kernels take 3 at a time, so that the rest
// goes in pairs (16 = 3 x 4 + 2 x 2) and a lone last query only when odd.
inline int64_t tripleQueries(int64_t queries) {
  int64_t triples = queries / 3;
  if (triples > 0 && (queries - 3 * triples) % 2 == 1)
    --triples;
  return 3 * triples;
}

// expF(x - m) as hd::softmaxMerge takes it, without the libm call where its
// value is exact: exp(+0) = 1 (x == m), exp(-inf) = 0 (an empty side).
inline float expOfGap(float x, float m) {
  if (x == m && std::isfinite(m))
    return 1.0f;
  if (x == -INFINITY && std::isfinite(m))
    return 0.0f;
  return hd::expF(x - m);
}

// hd::softmaxMerge(state, {blockMax, sum}) with the bits it has compiled
// into this file before (its a.sum * scaleA fused with the add), at most one
// exp: one side is always the larger. Returns scaleA, sets scaleB.
LLMC_ATTN_AVX2 inline float mergeBlock(hd::SoftmaxState &state, float blockMax, float sum,
                                       float &scaleB) {
  const float m = hd::maxF(state.max, blockMax);
  if (m == -INFINITY) { // both empty
    state = hd::softmaxEmpty();
    scaleB = 0.0f;
    return 0.0f;
  }
  const float scaleA = expOfGap(state.max, m);
  scaleB = expOfGap(blockMax, m);
  state = {m, std::fma(state.sum, scaleA, sum * scaleB)};
  return scaleA;
}

template <typename Key>
LLMC_ATTN_AVX2 void scoresOneQuery(const float *q, const Key *keys, int64_t stride, int64_t count,
                                   int64_t dim, float *out) {
  int64_t j = 0;
  for (; j + 4 <= count; j += 4)
    dots<1, 4>(q, 0, keys + j * stride, stride, dim, out + j, 0);
  for (; j < count; ++j)
    dots<1, 1>(q, 0, keys + j * stride, stride, dim, out + j, 0);
}

// Queries 2 at a time (2 x 2 pairs of two accumulators: 8 registers, the
// keys' chunks shared), a last odd one alone.
template <typename Key>
LLMC_ATTN_AVX2 void scoresManyQueries(const float *q, int64_t qStride, int64_t queries,
                                      const Key *keys, int64_t stride, int64_t count, int64_t dim,
                                      float *out, int64_t outStride) {
  int64_t n = 0;
  for (; n + 2 <= queries; n += 2) {
    const float *qn = q + n * qStride;
    float *o = out + n * outStride;
    int64_t j = 0;
    for (; j + 2 <= count; j += 2)
      dots<2, 2>(qn, qStride, keys + j * stride, stride, dim, o + j, outStride);
    if (j < count)
      dots<2, 1>(qn, qStride, keys + j * stride, stride, dim, o + j, outStride);
  }
  if (n < queries)
    scoresOneQuery(q + n * qStride, keys, stride, count, dim, out + n * outStride);
}

// 64 features (8 registers) at a time: every feature's sum is independent
// of the others', so splitting the head changes no bit.
template <typename Value>
LLMC_ATTN_AVX2 void accumulateOneQuery(float *acc, float accScale, const float *weights,
                                       const Value *values, int64_t stride, int64_t count,
                                       int64_t dim) {
  int64_t d = 0;
  for (; d + 64 <= dim; d += 64)
    accumulate<1, 8>(acc + d, 0, &accScale, weights, 0, values + d, stride, &count);
  for (; d + 8 <= dim; d += 8)
    accumulate<1, 1>(acc + d, 0, &accScale, weights, 0, values + d, stride, &count);
}

// Queries 2 at a time, 32 features (2 x 4 registers) at a time; a last odd
// query alone.
template <typename Value>
LLMC_ATTN_AVX2 void accumulateManyQueries(float *acc, const float *accScales, const float *weights,
                                          int64_t weightStride, int64_t queries,
                                          const Value *values, int64_t stride,
                                          const int64_t *counts, int64_t dim) {
  int64_t n = 0;
  for (; n + 2 <= queries; n += 2) {
    int64_t d = 0;
    for (; d + 32 <= dim; d += 32)
      accumulate<2, 4>(acc + n * dim + d, dim, accScales + n, weights + n * weightStride,
                       weightStride, values + d, stride, counts + n);
    for (; d + 8 <= dim; d += 8)
      accumulate<2, 1>(acc + n * dim + d, dim, accScales + n, weights + n * weightStride,
                       weightStride, values + d, stride, counts + n);
  }
  if (n < queries)
    accumulateOneQuery(acc + n * dim, accScales[n], weights + n * weightStride, values, stride,
                       counts[n], dim);
}

} // namespace

LLMC_ATTN_AVX2 void attentionScoresAvx2(const float *q, const float *keys, int64_t stride,
                                        int64_t count, int64_t dim, float *out) {
  scoresOneQuery(q, keys, stride, count, dim, out);
}

LLMC_ATTN_AVX2 void attentionScoresManyAvx2(const float *q, int64_t qStride, int64_t queries,
                                            const float *keys, int64_t stride, int64_t count,
                                            int64_t dim, float *out, int64_t outStride) {
  scoresManyQueries(q, qStride, queries, keys, stride, count, dim, out, outStride);
}

LLMC_ATTN_AVX2 void attentionScoresManyAvx2(const float *q, int64_t qStride, int64_t queries,
                                            const uint16_t *keys, int64_t stride, int64_t count,
                                            int64_t dim, float *out, int64_t outStride) {
  scoresManyQueries(q, qStride, queries, keys, stride, count, dim, out, outStride);
}

LLMC_ATTN_AVX2 void attentionAccumulateAvx2(float *acc, float accScale, const float *weights,
                                            const float *values, int64_t stride, int64_t count,
                                            int64_t dim) {
  accumulateOneQuery(acc, accScale, weights, values, stride, count, dim);
}

LLMC_ATTN_AVX2 void attentionAccumulateManyAvx2(float *acc, const float *accScales,
                                                const float *weights, int64_t weightStride,
                                                int64_t queries, const float *values,
                                                int64_t stride, const int64_t *counts,
                                                int64_t dim) {
  accumulateManyQueries(acc, accScales, weights, weightStride, queries, values, stride, counts,
                        dim);
}

LLMC_ATTN_AVX2 void attentionAccumulateManyAvx2(float *acc, const float *accScales,
                                                const float *weights, int64_t weightStride,
                                                int64_t queries, const uint16_t *values,
                                                int64_t stride, const int64_t *counts,
                                                int64_t dim) {
  accumulateManyQueries(acc, accScales, weights, weightStride, queries, values, stride, counts,
                        dim);
}

namespace {

// The first half of the softmax step: scale and soft-cap 8 lanes at a time (the cap lane by lane with
// hd::softCap's tanhf, so capped scores keep the portable path's bits), the
// block's max, the weights exp(s - block max) 8 at a time. A last partial
// vector is loaded and stored masked (max over -inf in its off lanes).
LLMC_ATTN_AVX2 inline float expWeights(float *s, int64_t count, float scale, float softcap) {
  const __m256 vscale = _mm256_set1_ps(scale), minusInf = _mm256_set1_ps(-INFINITY);
  __m256 vmax = minusInf;
  for (int64_t j = 0; j < count; j += 8) {
    const bool whole = j + 8 <= count;
    const __m256i lanes = firstLanes(count - j);
    __m256 x = _mm256_mul_ps(vscale, whole ? _mm256_loadu_ps(s + j) : _mm256_maskload_ps(s + j, lanes));
    if (softcap > 0.0f) {
      alignas(32) float capped[8];
      _mm256_store_ps(capped, x);
      for (float &c : capped)
        c = hd::softCap(c, softcap);
      x = _mm256_load_ps(capped);
    }
    if (whole) {
      _mm256_storeu_ps(s + j, x);
    } else {
      x = _mm256_blendv_ps(minusInf, x, _mm256_castsi256_ps(lanes));
      _mm256_maskstore_ps(s + j, lanes, x);
    }
    vmax = _mm256_max_ps(vmax, x);
  }
  const float blockMax = hmax(vmax);
  const __m256 vm = _mm256_set1_ps(blockMax);
  for (int64_t j = 0; j < count; j += 8) {
    if (j + 8 <= count) {
      _mm256_storeu_ps(s + j, expAvx2(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm)));
      continue;
    }
    const __m256i lanes = firstLanes(count - j);
    _mm256_maskstore_ps(s + j, lanes, expAvx2(_mm256_sub_ps(_mm256_maskload_ps(s + j, lanes), vm)));
  }
  return blockMax;
}

// The last step: s[j] *= scaleB unless scaleB is 1 (x * 1 is x).
LLMC_ATTN_AVX2 inline void scaleWeights(float *s, int64_t count, float scaleB) {
  if (scaleB == 1.0f)
    return;
  const __m256 factor = _mm256_set1_ps(scaleB);
  for (int64_t j = 0; j < count; j += 8) {
    if (j + 8 <= count) {
      _mm256_storeu_ps(s + j, _mm256_mul_ps(_mm256_loadu_ps(s + j), factor));
      continue;
    }
    const __m256i lanes = firstLanes(count - j);
    _mm256_maskstore_ps(s + j, lanes, _mm256_mul_ps(_mm256_maskload_ps(s + j, lanes), factor));
  }
}

} // namespace

// The weights' sum in order (as the portable path sums), the merge, the
// weights times the merge's scaleB.
LLMC_ATTN_AVX2 float attentionWeightsAvx2(float *s, int64_t count, float scale, float softcap,
                                          hd::SoftmaxState &state) {
  const float blockMax = expWeights(s, count, scale, softcap);
  float sum = 0.0f;
  for (int64_t j = 0; j < count; ++j)
    sum += s[j];
  float scaleB;
  const float scaleA = mergeBlock(state, blockMax, sum, scaleB);
  scaleWeights(s, count, scaleB);
  return scaleA;
}

// Four queries' sums side by side (four independent chains of in-order adds
// instead of one after another: the adds' latency overlaps), each query's
// own order and count.
LLMC_ATTN_AVX2 void attentionWeightsManyAvx2(float *s, int64_t sStride, int64_t queries,
                                             const int64_t *counts, float scale, float softcap,
                                             hd::SoftmaxState *states, float *accScales) {
  for (int64_t first = 0; first < queries; first += 4) {
    const int64_t chunk = std::min<int64_t>(4, queries - first);
    float blockMax[4], sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int64_t common = counts[first];
    for (int64_t n = 0; n < chunk; ++n) {
      blockMax[n] = expWeights(s + (first + n) * sStride, counts[first + n], scale, softcap);
      common = std::min(common, counts[first + n]);
    }
    int64_t done = 0;
    if (chunk == 4) {
      const float *s0 = s + first * sStride, *s1 = s0 + sStride, *s2 = s1 + sStride,
                  *s3 = s2 + sStride;
      for (; done < common; ++done) {
        sum[0] += s0[done];
        sum[1] += s1[done];
        sum[2] += s2[done];
        sum[3] += s3[done];
      }
    }
    for (int64_t n = 0; n < chunk; ++n) {
      float *row = s + (first + n) * sStride;
      for (int64_t j = done; j < counts[first + n]; ++j)
        sum[n] += row[j];
      float scaleB;
      accScales[first + n] = mergeBlock(states[first + n], blockMax[n], sum[n], scaleB);
      scaleWeights(row, counts[first + n], scaleB);
    }
  }
}

namespace {

// Queries 2 at a time as attentionScoresManyAvx2, each pair's dots stored
// at out[j * ldw + n]; a last odd query 4 keys at a time.
template <typename Key>
LLMC_ATTN_AVX2 void scoresColumns(const float *q, int64_t qStride, int64_t queries, const Key *keys,
                                  int64_t stride, int64_t count, int64_t dim, float *out,
                                  int64_t ldw) {
  int64_t n = 0;
  for (; n < tripleQueries(queries); n += 3) {
    const float *qn = q + n * qStride;
    int64_t j = 0;
    for (; j + 2 <= count; j += 2)
      dots<3, 2>(qn, qStride, keys + j * stride, stride, dim, out + j * ldw + n, 1, ldw);
    if (j < count)
      dots<3, 1>(qn, qStride, keys + j * stride, stride, dim, out + j * ldw + n, 1, ldw);
  }
  for (; n + 2 <= queries; n += 2) {
    const float *qn = q + n * qStride;
    int64_t j = 0;
    for (; j + 2 <= count; j += 2)
      dots<2, 2>(qn, qStride, keys + j * stride, stride, dim, out + j * ldw + n, 1, ldw);
    if (j < count)
      dots<2, 1>(qn, qStride, keys + j * stride, stride, dim, out + j * ldw + n, 1, ldw);
  }
  if (n < queries) {
    const float *qn = q + n * qStride;
    int64_t j = 0;
    for (; j + 4 <= count; j += 4) {
      float four[4];
      dots<1, 4>(qn, 0, keys + j * stride, stride, dim, four, 0);
      for (int k = 0; k < 4; ++k)
        out[(j + k) * ldw + n] = four[k];
    }
    for (; j < count; ++j)
      dots<1, 1>(qn, 0, keys + j * stride, stride, dim, out + j * ldw + n, 0);
  }
}

} // namespace

// Eight queries (lanes) at a time over the keys (rows of ldw floats): lane
// n's steps are expWeights' and attentionWeightsAvx2's on its own column
// (the max is exact in any order, the sum runs over j in order as there),
// the positions past counts[n] set to -inf before the max so that they add
// exp(-inf) = +0 to the sum and change no bit of it; the merges one query
// at a time (mergeBlock).
LLMC_ATTN_AVX2 void attentionWeightsColumnsAvx2(float *w, int64_t ldw, int64_t queries,
                                                const int64_t *counts, int64_t longest,
                                                float scale, float softcap,
                                                hd::SoftmaxState *states, float *accScales) {
  const __m256 vscale = _mm256_set1_ps(scale), minusInf = _mm256_set1_ps(-INFINITY);
  for (int64_t c = 0; c < queries; c += 8) {
    const int64_t lanes = std::min<int64_t>(8, queries - c);
    alignas(32) int32_t laneCounts[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t n = 0; n < lanes; ++n)
      laneCounts[n] = static_cast<int32_t>(counts[c + n]);
    const __m256i vcounts = _mm256_load_si256(reinterpret_cast<const __m256i *>(laneCounts));
    __m256 vmax = minusInf;
    for (int64_t j = 0; j < longest; ++j) {
      float *row = w + j * ldw + c;
      __m256 x = _mm256_mul_ps(vscale, _mm256_loadu_ps(row));
      if (softcap > 0.0f) {
        alignas(32) float capped[8];
        _mm256_store_ps(capped, x);
        for (float &v : capped)
          v = hd::softCap(v, softcap);
        x = _mm256_load_ps(capped);
      }
      const __m256 inside =
          _mm256_castsi256_ps(_mm256_cmpgt_epi32(vcounts, _mm256_set1_epi32(static_cast<int>(j))));
      x = _mm256_blendv_ps(minusInf, x, inside);
      _mm256_storeu_ps(row, x);
      vmax = _mm256_max_ps(vmax, x);
    }
    __m256 vsum = _mm256_setzero_ps();
    for (int64_t j = 0; j < longest; ++j) {
      float *row = w + j * ldw + c;
      const __m256 e = expAvx2(_mm256_sub_ps(_mm256_loadu_ps(row), vmax));
      _mm256_storeu_ps(row, e);
      vsum = _mm256_add_ps(vsum, e);
    }
    alignas(32) float blockMax[8], sum[8], scaleB[8];
    _mm256_store_ps(blockMax, vmax);
    _mm256_store_ps(sum, vsum);
    bool scaled = false;
    for (int64_t n = 0; n < 8; ++n) {
      if (n >= lanes) {
        scaleB[n] = 1.0f;
        continue;
      }
      accScales[c + n] = mergeBlock(states[c + n], blockMax[n], sum[n], scaleB[n]);
      scaled = scaled || scaleB[n] != 1.0f;
    }
    if (!scaled) // x * 1 is x
      continue;
    const __m256 factor = _mm256_load_ps(scaleB);
    for (int64_t j = 0; j < longest; ++j)
      _mm256_storeu_ps(w + j * ldw + c, _mm256_mul_ps(_mm256_loadu_ps(w + j * ldw + c), factor));
  }
}

namespace {

// Q queries (n .. n + Q of the column layout) over all dim features: Wide
// vectors per step, then one.
template <int Q, int Wide, typename Value>
LLMC_ATTN_AVX2 inline void
accumulateColumnQueries(float *acc, const float *accScales, const float *weights, int64_t ldw,
                        const Value *values, int64_t stride, const int64_t *counts, int64_t dim) {
  int64_t d = 0;
  for (; d + 8 * Wide <= dim; d += 8 * Wide)
    accumulate<Q, Wide>(acc + d, dim, accScales, weights, 1, values + d, stride, counts, ldw);
  for (; d + 8 <= dim; d += 8)
    accumulate<Q, 1>(acc + d, dim, accScales, weights, 1, values + d, stride, counts, ldw);
}

// attentionAccumulateManyAvx2 with query n's weight of position j at
// weights[j * ldw + n].
template <typename Value>
LLMC_ATTN_AVX2 void accumulateColumns(float *acc, const float *accScales, const float *weights,
                                      int64_t ldw, int64_t queries, const Value *values,
                                      int64_t stride, const int64_t *counts, int64_t dim) {
  int64_t n = 0;
  for (; n < tripleQueries(queries); n += 3)
    accumulateColumnQueries<3, 4>(acc + n * dim, accScales + n, weights + n, ldw, values, stride,
                                  counts + n, dim);
  for (; n + 2 <= queries; n += 2)
    accumulateColumnQueries<2, 4>(acc + n * dim, accScales + n, weights + n, ldw, values, stride,
                                  counts + n, dim);
  if (n < queries) // one query: its strides are never used
    accumulateColumnQueries<1, 8>(acc + n * dim, accScales + n, weights + n, ldw, values, stride,
                                  counts + n, dim);
}

} // namespace

LLMC_ATTN_AVX2 void attentionScoresColumnsAvx2(const float *q, int64_t qStride, int64_t queries,
                                               const float *keys, int64_t stride, int64_t count,
                                               int64_t dim, float *out, int64_t ldw) {
  scoresColumns(q, qStride, queries, keys, stride, count, dim, out, ldw);
}

LLMC_ATTN_AVX2 void attentionScoresColumnsAvx2(const float *q, int64_t qStride, int64_t queries,
                                               const uint16_t *keys, int64_t stride, int64_t count,
                                               int64_t dim, float *out, int64_t ldw) {
  scoresColumns(q, qStride, queries, keys, stride, count, dim, out, ldw);
}

LLMC_ATTN_AVX2 void attentionAccumulateColumnsAvx2(float *acc, const float *accScales,
                                                   const float *weights, int64_t ldw,
                                                   int64_t queries, const float *values,
                                                   int64_t stride, const int64_t *counts,
                                                   int64_t dim) {
  accumulateColumns(acc, accScales, weights, ldw, queries, values, stride, counts, dim);
}

LLMC_ATTN_AVX2 void attentionAccumulateColumnsAvx2(float *acc, const float *accScales,
                                                   const float *weights, int64_t ldw,
                                                   int64_t queries, const uint16_t *values,
                                                   int64_t stride, const int64_t *counts,
                                                   int64_t dim) {
  accumulateColumns(acc, accScales, weights, ldw, queries, values, stride, counts, dim);
}

LLMC_ATTN_AVX2 void attentionExpAvx2(const float *x, int64_t n, float *out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, expAvx2(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i lanes = firstLanes(n - i);
    _mm256_maskstore_ps(out + i, lanes, expAvx2(_mm256_maskload_ps(x + i, lanes)));
  }
}

} // namespace llmc::cpu::detail

#endif // __x86_64__
