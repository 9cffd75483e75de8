// Causal attention over the paged KV cache, for a batch step whose rows are
// the new tokens of several sequences (prefill chunks and decode tokens).
// Semantics are the CPU backend's (cpu/attention.h): the step's K/V rows go
// into the cache, and row t attends to positions 0..positions[t] of its
// sequence with scale * q . k scores and an online softmax
// (kernels/common/online_softmax.h). With a sliding window only positions
// windowStart(positions[t], window) .. positions[t] count, and a softcap
// bounds each scaled score (kernels/common/attention_scores.h; 0 and 0 are
// plain causal attention); a block's positions start at its first row's
// window, so cache blocks wholly before it are never read.
//
// Grid (ceil(T / BM), NKV, NSPLITS); one block handles BM query rows x the
// GROUP query heads sharing KV head blockIdx.y (GQA: each K/V chunk is read
// once for the whole group), over one split of the positions.
//   prefill: BM > 1 rows (tiled), NSPLITS == 1;
//   decode:  BM == 1, at most NSPLITS splits (flash-decoding), their length
//            chosen at run time from the row's visible positions
//            (kernels/common/decode_splits.h; splits past the context exit
//            at once): each writes (max, sum, acc) to the workspace and the
//            last split block to finish merges them, one split per lane.
// Positions before the sequence's first new row are read from the cache
// through its block table; the step's own rows are read from the k/v inputs
// (they are written to the cache by split 0 in the same launch, so no block
// depends on another's cache writes).
//
// q, k and v are read from column QC, KC, VC on of rows of QS, KS, VS
// elements (a packed qkv buffer, RopeAttention), the output is [T, heads * D].
// With ROPE, q and the new k rows are rotated on the fly by the spec R
// (rope.cuh: rotary dim, pair layout, frequencies of this sequence's forward
// pass, attention factor), k before it is written to the cache, as the CPU
// does.
//
// Per block, dynamic shared memory of (BN * (D + 1) + BN * D + BM * GROUP * D)
// floats: a K chunk (rows padded against bank conflicts), a V chunk, the
// queries. Warp w owns query vectors w, w + WARPS, ...; lane j scores
// position j of a chunk of BN = 32; lane l accumulates dims l, l + 32, ...
// The next chunk's K/V loads are issued into registers before the current
// chunk's scores (double buffering: global latency behind the arithmetic).
#pragma once

#include "kernels/common/attention_scores.h"
#include "kernels/common/decode_splits.h"
#include "kernels/common/online_softmax.h"
#include "kernels/common/rope.h"
#include "llmc/common.cuh"
#include "llmc/rope.cuh"

namespace llmc::dev {

// Copies VEC elements of T without conversion (one access).
template <int VEC, class T> __device__ __forceinline__ void copyVec(T *dst, const T *src) {
  using V = typename RawVec<VEC * sizeof(T)>::type;
  *reinterpret_cast<V *>(dst) = *reinterpret_cast<const V *>(src);
}

// Rotates the RoPE pairs of `rows` head vectors of D floats in shared
// memory (row j at `position(j)`, skipped when it returns < 0).
template <class R, int D, int THREADS, class PositionOf>
__device__ __forceinline__ void ropeInShared(float *vectors, int rows, int seqLen,
                                             PositionOf position) {
  constexpr int kPairs = R::kRotaryDim / 2;
  for (int i = threadIdx.x; i < rows * kPairs; i += THREADS) {
    const int row = i / kPairs, pair = i % kPairs;
    const int pos = position(row);
    if (pos < 0)
      continue;
    ropeRotateAt<R>(vectors + row * D, pair, pos, seqLen);
  }
}

// The K and V vectors of one chunk that a thread loads, held raw (as
// stored) in registers between the load and the store to shared memory.
template <class TA, int D, int VEC, int THREADS, int BN> struct ChunkLoads {
  using Raw = typename RawVec<VEC * sizeof(TA)>::type;
  static constexpr int kIters = (BN * D / VEC + THREADS - 1) / THREADS;
  Raw k[kIters], v[kIters];

  // Element offset of iteration `it`'s vector in the [BN][D] chunk.
  __device__ __forceinline__ static int offset(int it) { return (threadIdx.x + it * THREADS) * VEC; }

  // Positions c0 + j < pEnd: from the cache through `cacheSlot` before
  // firstPos, else from the step's own k/v rows (`rowK`, `rowV`); zeros after.
  template <class CacheSlot, class RowK, class RowV>
  __device__ __forceinline__ void fetch(int c0, int pEnd, int firstPos, const TA *keys,
                                        const TA *values, CacheSlot cacheSlot, RowK rowK,
                                        RowV rowV) {
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int i = offset(it), j = i / D, d = i % D, p = c0 + j;
      k[it] = v[it] = Raw{};
      if (i < BN * D && p < pEnd) {
        const TA *ks = p < firstPos ? keys + cacheSlot(p) + d : rowK(p) + d;
        const TA *vs = p < firstPos ? values + cacheSlot(p) + d : rowV(p) + d;
        k[it] = *reinterpret_cast<const Raw *>(ks);
        v[it] = *reinterpret_cast<const Raw *>(vs);
      }
    }
  }

  // As floats into ks [BN][D + 1] and vs [BN][D].
  __device__ __forceinline__ void store(float *ks, float *vs) const {
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int i = offset(it), j = i / D, d = i % D;
      if (i >= BN * D)
        continue;
      float kv[VEC], vv[VEC];
      loadVec<VEC>(reinterpret_cast<const TA *>(&k[it]), kv);
      loadVec<VEC>(reinterpret_cast<const TA *>(&v[it]), vv);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        ks[j * (D + 1) + d + e] = kv[e];
        vs[j * D + d + e] = vv[e];
      }
    }
  }
};

// The last split block of (row r0, KV head kvh): merges the `count` splits'
// partials [heads, NSPLITS, D + 2] of each head of the group, split s's
// (max, sum) read by lane s % 32 and its accumulator by all lanes, with one
// common max (softmaxScaleTo), and writes the output row.
template <class TA, int D, int GROUP, int NKV, int NSPLITS, int WARPS>
__device__ __forceinline__ void mergeSplits(const float *partials, TA *out, int r0, int kvh,
                                            int count) {
  constexpr int kHeads = NKV * GROUP, kOutWidth = kHeads * D, DPL = (D + 31) / 32;
  constexpr int SPL = (NSPLITS + 31) / 32; // splits per lane
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int g = warp; g < GROUP; g += WARPS) {
    const int head = kvh * GROUP + g;
    const float *part = partials + (static_cast<i64>(r0) * kHeads + head) * NSPLITS * (D + 2);
    hd::SoftmaxState mine[SPL];
    float m = -hd::infinity();
#pragma unroll
    for (int i = 0; i < SPL; ++i) {
      const int s = lane + 32 * i;
      mine[i] = s < count ? hd::SoftmaxState{loadCoherent(part + s * (D + 2) + D),
                                             loadCoherent(part + s * (D + 2) + D + 1)}
                          : hd::softmaxEmpty();
      m = hd::maxF(m, mine[i].max);
    }
    m = warpMax(m);
    float scale[SPL], sum = 0.0f;
#pragma unroll
    for (int i = 0; i < SPL; ++i) {
      scale[i] = hd::softmaxScaleTo(mine[i], m);
      sum += mine[i].sum * scale[i];
    }
    sum = warpSum(sum);
    float total[DPL] = {};
#pragma unroll
    for (int i = 0; i < SPL; ++i) {
      const int end = min(count, 32 * i + 32);
#pragma unroll 4
      for (int s = 32 * i; s < end; ++s) {
        const float f = __shfl_sync(0xffffffffu, scale[i], s - 32 * i);
#pragma unroll
        for (int dd = 0; dd < DPL; ++dd) {
          const int d = lane + 32 * dd;
          if (d < D)
            total[dd] += f * loadCoherent(part + s * (D + 2) + d);
        }
      }
    }
    const float inv = hd::softmaxInvSum(hd::SoftmaxState{m, sum});
#pragma unroll
    for (int dd = 0; dd < DPL; ++dd) {
      const int d = lane + 32 * dd;
      if (d < D)
        out[static_cast<i64>(r0) * kOutWidth + head * D + d] = fromFloat<TA>(total[dd] * inv);
    }
  }
}

template <class TA, int D, int GROUP, int NKV, int BM, int NSPLITS, int BS, int VEC, int WARPS,
          int QS, int KS, int VS, int QC, int KC, int VC, bool ROPE, class R = NoRope>
__device__ __forceinline__ void attention(const abi::StepArgs &a, float scale, int window,
                                          float softcap) {
  static_assert(NSPLITS == 1 || BM == 1, "split positions only for one row per block");
  static_assert(D % VEC == 0, "head dim must be whole vectors");
  constexpr int BN = 32, kThreads = WARPS * 32;
  constexpr int QV = BM * GROUP, QPW = (QV + WARPS - 1) / WARPS, DPL = (D + 31) / 32;
  constexpr int kHeads = NKV * GROUP, kOutWidth = kHeads * D, kKvWidth = NKV * D;
  static_assert(!ROPE || (R::kRotaryDim % 2 == 0 && R::kRotaryDim <= D), "RoPE pairs");
  constexpr int kPairs = R::kRotaryDim / 2;
  constexpr bool kPartial = ROPE && R::kRotaryDim < D; // features past kRotaryDim pass through
  extern __shared__ float smem[];
  float *ks = smem;              // [BN][D + 1]
  float *vs = ks + BN * (D + 1); // [BN][D]
  float *qs = vs + BN * D;       // [QV][D]

  const int r0 = blockIdx.x * BM, kvh = blockIdx.y, split = blockIdx.z;
  if (r0 >= a.rows)
    return;
  const int r1 = min(r0 + BM, a.rows);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const TA *q = static_cast<const TA *>(a.in[0]);
  const TA *k = static_cast<const TA *>(a.in[1]);
  const TA *v = static_cast<const TA *>(a.in[2]);
  TA *keys = static_cast<TA *>(a.kvKeys);
  TA *values = static_cast<TA *>(a.kvValues);
  TA *out = static_cast<TA *>(a.out);

  // Rows [segBegin, segEnd) of the tile belong to one sequence.
  for (int segBegin = r0; segBegin < r1;) {
    const int seq = a.rowSequence[segBegin];
    const int seqFirst = a.seqFirstRow[seq];
    const int segEnd = min(r1, seqFirst + a.seqNumRows[seq]);
    const int firstPos = a.positions[seqFirst]; // positions of a sequence's rows are consecutive
    const int lastPos = a.positions[segEnd - 1];
    const int seqLen = ropeSeqLen<R>(a, seq); // RoPE: this sequence's forward pass
    const int *table = a.blockTables + static_cast<i64>(seq) * a.blockTableStride;
    auto slotOf = [&](int position) {
      return (static_cast<i64>(table[position / BS]) * BS + position % BS) * kKvWidth + kvh * D;
    };
    __syncthreads(); // the previous segment is done with shared memory

    // This block's positions [pBegin, pEnd): those its rows see (from the
    // first row's window on), or its split's share of them.
    const int windowBegin = hd::windowStart(a.positions[segBegin], window);
    int pBegin = windowBegin, pEnd = lastPos + 1, splitCount = 1;
    if (NSPLITS > 1) {
      const hd::DecodeSplits splits = hd::decodeSplits(pEnd - windowBegin, NSPLITS, BN);
      splitCount = splits.count;
      pBegin = min(windowBegin + split * splits.length, pEnd);
      pEnd = min(pEnd, pBegin + splits.length);
    }
    // A split past the context only arrives (split 0 always has positions).
    const bool working = pBegin < pEnd;

    if (split == 0) {
      for (int i = threadIdx.x * VEC; i < (segEnd - segBegin) * D; i += kThreads * VEC) {
        const int row = segBegin + i / D, d = i % D;
        const i64 slot = slotOf(a.positions[row]) + d;
        copyVec<VEC>(values + slot, v + static_cast<i64>(row) * VS + VC + kvh * D + d);
        if (!ROPE || kPartial) // partial rotary: the rotated pairs overwrite theirs below
          copyVec<VEC>(keys + slot, k + static_cast<i64>(row) * KS + KC + kvh * D + d);
      }
      if (kPartial)
        __syncthreads();
      if (ROPE) // the cache holds rotated keys
        for (int i = threadIdx.x; i < (segEnd - segBegin) * kPairs; i += kThreads) {
          const int row = segBegin + i / kPairs, pair = i % kPairs;
          const TA *src = k + static_cast<i64>(row) * KS + KC + kvh * D;
          int f0, f1;
          ropePair<R>(pair, f0, f1);
          float k0 = toFloat(src[f0]), k1 = toFloat(src[f1]), c, sn;
          ropeCosSinAt<R>(a.positions[row], pair, seqLen, c, sn);
          hd::ropeRotate(k0, k1, c, sn);
          const i64 slot = slotOf(a.positions[row]);
          keys[slot + f0] = fromFloat<TA>(k0);
          keys[slot + f1] = fromFloat<TA>(k1);
        }
    }
    for (int i = threadIdx.x * VEC; working && i < QV * D; i += kThreads * VEC) {
      const int qv = i / D, d = i % D, row = r0 + qv / GROUP;
      float vals[VEC] = {};
      if (row >= segBegin && row < segEnd)
        loadVec<VEC>(q + static_cast<i64>(row) * QS + QC + (kvh * GROUP + qv % GROUP) * D + d,
                     vals);
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        qs[i + e] = vals[e];
    }
    if (ROPE && working) {
      __syncthreads();
      ropeInShared<R, D, kThreads>(qs, QV, seqLen, [&](int qv) {
        const int row = r0 + qv / GROUP;
        return row >= segBegin && row < segEnd ? a.positions[row] : -1;
      });
    }

    hd::SoftmaxState state[QPW];
    float acc[QPW][DPL];
#pragma unroll
    for (int iq = 0; iq < QPW; ++iq) {
      state[iq] = hd::softmaxEmpty();
#pragma unroll
      for (int dd = 0; dd < DPL; ++dd)
        acc[iq][dd] = 0.0f;
    }

    ChunkLoads<TA, D, VEC, kThreads, BN> loads;
    auto fetch = [&](int c0) {
      loads.fetch(
          c0, pEnd, firstPos, keys, values, slotOf,
          [&](int p) { return k + static_cast<i64>(seqFirst + p - firstPos) * KS + KC + kvh * D; },
          [&](int p) { return v + static_cast<i64>(seqFirst + p - firstPos) * VS + VC + kvh * D; });
    };
    if (working)
      fetch(pBegin);
    for (int c0 = pBegin; c0 < pEnd; c0 += BN) {
      __syncthreads(); // queries written / previous chunk consumed
      loads.store(ks, vs);
      __syncthreads();
      if (c0 + BN < pEnd) // in flight during this chunk's scores
        fetch(c0 + BN);
      if (ROPE && c0 + BN > firstPos) { // the step's own keys, not rotated yet (pitch D + 1)
        for (int i = threadIdx.x; i < BN * kPairs; i += kThreads) {
          const int j = i / kPairs, pair = i % kPairs, p = c0 + j;
          if (p < firstPos || p >= pEnd)
            continue;
          ropeRotateAt<R>(ks + j * (D + 1), pair, p, seqLen);
        }
        __syncthreads();
      }
#pragma unroll
      for (int iq = 0; iq < QPW; ++iq) {
        const int qv = warp + iq * WARPS;
        const int row = r0 + qv / GROUP;
        if (qv >= QV || row < segBegin || row >= segEnd) // uniform over the warp
          continue;
        const int p = c0 + lane, rowPos = a.positions[row];
        float score = -hd::infinity();
        if (p < pEnd && p <= rowPos && p >= hd::windowStart(rowPos, window)) {
          float dot = 0.0f;
#pragma unroll 16
          for (int d = 0; d < D; ++d)
            dot += qs[qv * D + d] * ks[lane * (D + 1) + d];
          score = hd::softCap(scale * dot, softcap);
        }
        const float chunkMax = warpMax(score);
        if (chunkMax == -hd::infinity()) // no visible position in this chunk
          continue;
        const float weight = hd::expF(score - chunkMax); // 0 for masked positions
        const hd::SoftmaxMerge merged =
            hd::softmaxMerge(state[iq], hd::SoftmaxState{chunkMax, warpSum(weight)});
        state[iq] = merged.state;
#pragma unroll
        for (int dd = 0; dd < DPL; ++dd)
          acc[iq][dd] *= merged.scaleA;
        for (int j = 0; j < BN; ++j) {
          const float pj = __shfl_sync(0xffffffffu, weight, j) * merged.scaleB;
#pragma unroll
          for (int dd = 0; dd < DPL; ++dd) {
            const int d = lane + 32 * dd;
            if (d < D)
              acc[iq][dd] += pj * vs[j * D + d];
          }
        }
      }
    }

    float *partials = static_cast<float *>(a.workspace); // [T, heads, NSPLITS, D + 2]
#pragma unroll
    for (int iq = 0; iq < QPW; ++iq) {
      const int qv = warp + iq * WARPS;
      const int row = r0 + qv / GROUP;
      if (!working || qv >= QV || row < segBegin || row >= segEnd)
        continue;
      const int head = kvh * GROUP + qv % GROUP;
      if (NSPLITS == 1) {
        const float inv = hd::softmaxInvSum(state[iq]);
#pragma unroll
        for (int dd = 0; dd < DPL; ++dd) {
          const int d = lane + 32 * dd;
          if (d < D)
            out[static_cast<i64>(row) * kOutWidth + head * D + d] =
                fromFloat<TA>(acc[iq][dd] * inv);
        }
      } else {
        float *part =
            partials + ((static_cast<i64>(row) * kHeads + head) * NSPLITS + split) * (D + 2);
#pragma unroll
        for (int dd = 0; dd < DPL; ++dd) {
          const int d = lane + 32 * dd;
          if (d < D)
            part[d] = acc[iq][dd];
        }
        if (lane == 0) {
          part[D] = state[iq].max;
          part[D + 1] = state[iq].sum;
        }
      }
    }

    if (NSPLITS > 1) {
      // BM == 1: the tile is one row.
      if (!arriveLast(a.counters + r0 * NKV + kvh, NSPLITS))
        return;
      mergeSplits<TA, D, GROUP, NKV, NSPLITS, WARPS>(partials, out, r0, kvh, splitCount);
    }
    segBegin = segEnd;
  }
}

} // namespace llmc::dev
