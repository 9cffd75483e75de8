// Internal: the inner loops of cpu::pagedAttention over one block of keys
// and values for one query head, with the keys' and values' rows kept in
// registers across the block instead of one ops.dot / ops.axpy call per
// position. The dot products and the accumulate give the bits of the IsaOps
// calls they replace (dotAvx2, scaleAvx2 and axpyAvx2 of simd_avx2.cpp, same
// products, same order), one query or several at a time; the weights use the
// vector exp of attention_exp.h. Decode and prefill run the same operations
// per query, so they keep summing alike. AVX2 and AVX-512 machines run them
// (an AVX-512 machine's attention sums in AVX2's order, not its own dot's).
#pragma once

#include "kernels/common/online_softmax.h"

#include <cstdint>

namespace llmc::cpu::detail {

// Whether the kernels below take heads of `headDim` features (a multiple of 8).
inline bool attentionKernelsFit(int64_t headDim) { return headDim > 0 && headDim % 8 == 0; }

#if defined(__x86_64__)
// dots[j] = dotAvx2(q, keys + j * stride, dim) for j < count, bit for bit.
void attentionScoresAvx2(const float *q, const float *keys, int64_t stride, int64_t count,
                         int64_t dim, float *dots);

// The same dot products for `queries` queries (rows of qStride floats) over
// one block: dots[n * outStride + j] = dotAvx2(q + n * qStride, keys + j *
// stride, dim), bit for bit as attentionScoresAvx2 gives them one query at a
// time (each key's chunk is loaded once for two queries).
void attentionScoresManyAvx2(const float *q, int64_t qStride, int64_t queries, const float *keys,
                             int64_t stride, int64_t count, int64_t dim, float *dots,
                             int64_t outStride);
// The same over an f16 cache's keys, read in place and widened (exact): the
// bits of the f32 call over those keys widened.
void attentionScoresManyAvx2(const float *q, int64_t qStride, int64_t queries, const uint16_t *keys,
                             int64_t stride, int64_t count, int64_t dim, float *dots,
                             int64_t outStride);

// One block's softmax step: s[j] = softCap(scale * s[j], softcap) for
// j < count, the block's max b, s[j] = attentionExp(s[j] - b), their sum in
// order, merged = hd::softmaxMerge(state, {b, sum}), state = merged.state,
// s[j] *= merged.scaleB; returns merged.scaleA, the factor of the
// accumulator so far. The portable path's steps (hd::expF in place of
// attentionExp), so only the exp tells them apart.
float attentionWeightsAvx2(float *s, int64_t count, float scale, float softcap,
                           hd::SoftmaxState &state);

// attentionWeightsAvx2 for `queries` queries (score rows of sStride
// floats), query n over its own first counts[n] scores with its own state
// states[n]; accScales[n] receives its scaleA. The same bits as one call per
// query (four queries' sums run side by side).
void attentionWeightsManyAvx2(float *s, int64_t sStride, int64_t queries, const int64_t *counts,
                              float scale, float softcap, hd::SoftmaxState *states,
                              float *accScales);

// acc[0 .. dim) = scaleAvx2(accScale, acc), then axpyAvx2(weights[j],
// values + j * stride, acc) for j = 0 .. count - 1 in order.
void attentionAccumulateAvx2(float *acc, float accScale, const float *weights,
                             const float *values, int64_t stride, int64_t count, int64_t dim);

// attentionAccumulateAvx2 for `queries` queries: accumulators acc [queries,
// dim], factors accScales [queries], weights rows of weightStride floats,
// query n over the first counts[n] positions (a diagonal block's rows end at
// their own position); each value chunk is loaded once for two queries. The
// same bits as one attentionAccumulateAvx2 per query.
void attentionAccumulateManyAvx2(float *acc, const float *accScales, const float *weights,
                                 int64_t weightStride, int64_t queries, const float *values,
                                 int64_t stride, const int64_t *counts, int64_t dim);
// The same over an f16 cache's values, read in place and widened.
void attentionAccumulateManyAvx2(float *acc, const float *accScales, const float *weights,
                                 int64_t weightStride, int64_t queries, const uint16_t *values,
                                 int64_t stride, const int64_t *counts, int64_t dim);

// The column layout of a tile's block (query n's value for position j at
// w[j * ldw + n], ldw a multiple of 8 and at least `queries` rounded up to
// 8), in which the softmax step runs 8 queries per vector:
// attentionScoresManyAvx2's dots stored there, ...
void attentionScoresColumnsAvx2(const float *q, int64_t qStride, int64_t queries,
                                const float *keys, int64_t stride, int64_t count, int64_t dim,
                                float *out, int64_t ldw);
void attentionScoresColumnsAvx2(const float *q, int64_t qStride, int64_t queries,
                                const uint16_t *keys, int64_t stride, int64_t count, int64_t dim,
                                float *out, int64_t ldw); // an f16 cache's keys in place

// ... attentionWeightsManyAvx2 on the columns (positions j < longest, the
// largest count; the ones past a query's count may hold anything and are
// left at 0), with the same bits per query ...
void attentionWeightsColumnsAvx2(float *w, int64_t ldw, int64_t queries, const int64_t *counts,
                                 int64_t longest, float scale, float softcap,
                                 hd::SoftmaxState *states, float *accScales);

// ... and attentionAccumulateManyAvx2 reading them.
void attentionAccumulateColumnsAvx2(float *acc, const float *accScales, const float *weights,
                                    int64_t ldw, int64_t queries, const float *values,
                                    int64_t stride, const int64_t *counts, int64_t dim);
void attentionAccumulateColumnsAvx2(float *acc, const float *accScales, const float *weights,
                                    int64_t ldw, int64_t queries, const uint16_t *values,
                                    int64_t stride, const int64_t *counts, int64_t dim);

// out[i] = attentionExp(x[i]) for i < n, 8 lanes at a time (for the tests).
void attentionExpAvx2(const float *x, int64_t n, float *out);
#endif

} // namespace llmc::cpu::detail
