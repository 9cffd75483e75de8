#include "cpu/attention.h"

#include "cpu/attention_kernels.h"
#include "cpu/isa.h"
#include "cpu/simd.h"
#include "kernels/common/online_softmax.h"
#include "kernels/common/rope.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace llmc::cpu {
namespace {

// Work (floats touched or multiply-adds) below which a chunk is not worth a thread.
constexpr int64_t kMinFloatsPerChunk = 16 * 1024;

// Offset in floats of the slot of `position` in a layer's K or V.
inline int64_t slotOffset(const kv::KvLayerView &cache, const int32_t *blockTable,
                          int64_t position) {
  int64_t block = blockTable[position / cache.blockSize];
  return (block * cache.blockSize + position % cache.blockSize) * cache.kvHeads * cache.headDim;
}

// The index of the sequence that holds `row`, or -1.
int64_t sequenceOfRow(const AttentionBatch &b, int64_t row) {
  const AttentionSequence *end = b.sequences + b.numSequences;
  const AttentionSequence *it = std::upper_bound(
      b.sequences, end, row, [](int64_t r, const AttentionSequence &s) { return r < s.firstRow; });
  if (it == b.sequences)
    return -1;
  --it;
  return row < it->firstRow + it->numRows ? it - b.sequences : -1;
}

int64_t ropeRow(const AttentionBatch &b, int64_t row) {
  return b.ropeRows != nullptr ? b.ropeRows[row] : b.positions[row];
}

// Features of each head that rotate: the batch's rotary dim, or the head.
int64_t rotaryDimOf(const AttentionBatch &b, int64_t headDim) {
  return b.ropeRotaryDim > 0 ? b.ropeRotaryDim : headDim;
}

// Rotates `heads` heads of headDim from `in` into `out` with one row of a
// RoPE table (cos then sin, rotaryDim floats); features past rotaryDim pass.
void rotateHeads(const float *in, float *out, int64_t heads, int64_t headDim, int64_t rotaryDim,
                 bool interleaved, const float *cosSin) {
  const int64_t half = rotaryDim / 2;
  std::memcpy(out, in, heads * headDim * sizeof(float));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i) {
      int first, second;
      hd::ropePairFeatures(static_cast<int>(i), static_cast<int>(rotaryDim), interleaved, first,
                           second);
      float x0 = in[h * headDim + first], x1 = in[h * headDim + second];
      hd::ropeRotate(x0, x1, cosSin[i], cosSin[half + i]);
      out[h * headDim + first] = x0;
      out[h * headDim + second] = x1;
    }
}

// Per-thread working memory of one (row, kv head) item, grown once.
struct Scratch {
  std::vector<float> acc;               // [group, headDim] unnormalized outputs
  std::vector<float> scores;            // [group, blockSize] one block's exp(scores)
  std::vector<hd::SoftmaxState> states; // [group]
  std::vector<float> q;                 // [group, headDim] rotated queries (RoPE prologue)

  void reserve(int64_t group, const kv::KvLayerView &cache) {
    acc.resize(std::max<size_t>(acc.size(), group * cache.headDim));
    q.resize(std::max<size_t>(q.size(), group * cache.headDim));
    scores.resize(std::max<size_t>(scores.size(), group * cache.blockSize));
    states.resize(std::max<size_t>(states.size(), group));
  }
};

// Attention of `group` query heads (sharing kv head `kvHead`) of one row over
// positions [firstPosition, lastPosition] of a sequence (the row's window);
// qGroup [group, headDim] holds their queries.
void attendGroup(const detail::IsaOps &ops, const AttentionBatch &b, const kv::KvLayerView &cache,
                 const int32_t *blockTable, const float *qGroup, int64_t row,
                 int64_t firstPosition, int64_t lastPosition, int64_t kvHead, int64_t group,
                 Scratch &scratch) {
  const int64_t dim = cache.headDim, bs = cache.blockSize;
  const float softcap = b.scores.softcap;
  float *acc = scratch.acc.data();
  float *scores = scratch.scores.data();
  hd::SoftmaxState *state = scratch.states.data();
  std::fill(acc, acc + group * dim, 0.0f);
  std::fill(state, state + group, hd::softmaxEmpty());
  const int64_t kvStride = cache.kvHeads * dim;
#if defined(__x86_64__)
  // The AVX2 block kernels: the bits of the ops.dot / ops.axpy calls below.
  const bool blockKernels = activeIsa() == Isa::Avx2 && detail::attentionKernelsFit(dim);
#endif
  // Block by block from the window's first block; `start` is the first
  // visible position of each (the window may begin inside the first block).
  for (int64_t start = firstPosition; start <= lastPosition; start = (start / bs + 1) * bs) {
    const int64_t count = std::min((start / bs + 1) * bs, lastPosition + 1) - start;
    const int64_t base = slotOffset(cache, blockTable, start) + kvHead * dim;
    const float *keys = cache.keys + base;     // count slots, stride kvStride
    const float *values = cache.values + base; // same
    for (int64_t g = 0; g < group; ++g) {
      const float *q = qGroup + g * dim;
      float *s = scores + g * bs;
      float blockMax = -INFINITY;
#if defined(__x86_64__)
      if (blockKernels) {
        detail::attentionScoresAvx2(q, keys, kvStride, count, dim, s);
        for (int64_t j = 0; j < count; ++j) {
          s[j] = hd::softCap(b.scale * s[j], softcap);
          blockMax = std::max(blockMax, s[j]);
        }
      } else
#endif
        for (int64_t j = 0; j < count; ++j) {
          s[j] = hd::softCap(b.scale * ops.dot(q, keys + j * kvStride, dim), softcap);
          blockMax = std::max(blockMax, s[j]);
        }
      hd::SoftmaxState blockState{blockMax, 0.0f};
      for (int64_t j = 0; j < count; ++j) {
        s[j] = hd::expF(s[j] - blockMax);
        blockState.sum += s[j];
      }
      hd::SoftmaxMerge merged = hd::softmaxMerge(state[g], blockState);
      state[g] = merged.state;
      float *a = acc + g * dim;
#if defined(__x86_64__)
      if (blockKernels) {
        detail::attentionAccumulateAvx2(a, merged.scaleA, s, merged.scaleB, values, kvStride,
                                        count, dim);
        continue;
      }
#endif
      ops.scale(merged.scaleA, a, dim);
      for (int64_t j = 0; j < count; ++j)
        ops.axpy(s[j] * merged.scaleB, values + j * kvStride, a, dim);
    }
  }
  for (int64_t g = 0; g < group; ++g) {
    float *out = b.out + row * b.ldo + (kvHead * group + g) * dim;
    std::memcpy(out, acc + g * dim, dim * sizeof(float));
    ops.scale(hd::softmaxInvSum(state[g]), out, dim);
  }
}

} // namespace

void writeKvCache(ThreadPool &pool, const AttentionBatch &b, const kv::KvLayerView &cache) {
  if (b.numSequences == 0)
    return;
  const AttentionSequence &last = b.sequences[b.numSequences - 1];
  const int64_t rowFloats = cache.kvHeads * cache.headDim;
  pool.parallelFor(
      last.firstRow + last.numRows,
      [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          const int64_t s = sequenceOfRow(b, row);
          if (s < 0)
            continue;
          int64_t slot = slotOffset(cache, b.sequences[s].blockTable, b.positions[row]);
          if (b.ropeTable != nullptr)
            rotateHeads(b.k + row * b.ldk, cache.keys + slot, cache.kvHeads, cache.headDim,
                        rotaryDimOf(b, cache.headDim), b.ropeInterleaved,
                        b.ropeTable + ropeRow(b, row) * rotaryDimOf(b, cache.headDim));
          else
            std::memcpy(cache.keys + slot, b.k + row * b.ldk, rowFloats * sizeof(float));
          std::memcpy(cache.values + slot, b.v + row * b.ldv, rowFloats * sizeof(float));
        }
      },
      kMinFloatsPerChunk / rowFloats + 1);
}

void pagedAttention(ThreadPool &pool, const AttentionBatch &b, const kv::KvLayerView &cache) {
  writeKvCache(pool, b, cache);
  if (b.numSequences == 0)
    return;
  const AttentionSequence &last = b.sequences[b.numSequences - 1];
  const int64_t rows = last.firstRow + last.numRows;
  const int64_t group = b.heads / cache.kvHeads;
  const detail::IsaOps &ops = detail::activeOps();
  // An item (row, kv head) costs about (visible positions) * group * headDim
  // multiply-adds; chunks below kMinFloatsPerChunk are not worth a thread.
  int64_t work = 0;
  for (int64_t s = 0; s < b.numSequences; ++s) {
    const AttentionSequence &seq = b.sequences[s];
    for (int64_t r = seq.firstRow; r < seq.firstRow + seq.numRows; ++r)
      work += (b.positions[r] + 1 - hd::windowStart(b.positions[r], b.scores.window)) * b.heads *
              cache.headDim;
  }
  const int64_t items = rows * cache.kvHeads;
  const int64_t grain = kMinFloatsPerChunk * items / (work + 1) + 1;
  pool.parallelFor(
      items,
      [&](int64_t begin, int64_t end) {
        thread_local Scratch scratch;
        scratch.reserve(group, cache);
        for (int64_t item = begin; item < end; ++item) {
          const int64_t row = item / cache.kvHeads, kvHead = item % cache.kvHeads;
          const int64_t s = sequenceOfRow(b, row);
          if (s < 0)
            continue;
          const float *q = b.q + row * b.ldq + kvHead * group * cache.headDim;
          if (b.ropeTable != nullptr) {
            rotateHeads(q, scratch.q.data(), group, cache.headDim, rotaryDimOf(b, cache.headDim),
                        b.ropeInterleaved,
                        b.ropeTable + ropeRow(b, row) * rotaryDimOf(b, cache.headDim));
            q = scratch.q.data();
          }
          attendGroup(ops, b, cache, b.sequences[s].blockTable, q, row,
                      hd::windowStart(b.positions[row], b.scores.window), b.positions[row], kvHead,
                      group, scratch);
        }
      },
      grain);
}

} // namespace llmc::cpu
