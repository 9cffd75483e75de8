#include "cpu/attention.h"

#include "cpu/attention_kernels.h"
#include "cpu/half_rows.h"
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

// Offset in elements of the slot of `position` in a layer's K or V.
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

// A query tile: consecutive rows of one sequence attended together, so that
// each K/V block is read once (into L1) for all of their query heads.
struct QueryTile {
  int64_t sequence, firstRow, rows;
};

// Query heads (tile rows x group) a tile holds: 16 heads' accumulators of
// 128 features are 8 KiB, beside a 16-position K and V block of 8 KiB each.
constexpr int64_t kTileQueries = 16;

// Queries of a block part below which the softmax step runs query by query
// (rows of the block) instead of 8 queries per vector (columns): the
// columns' exp and max work on whole vectors of 8 lanes.
constexpr int64_t kMinColumnQueries = 6;

int64_t rowsPerTile(int64_t group) { return std::max<int64_t>(1, kTileQueries / group); }

// Per-thread working memory of one (tile, kv head) item, grown once.
struct Scratch {
  std::vector<float> acc;               // [queries, headDim] unnormalized outputs
  std::vector<float> scores;            // one block's weights: [blockSize, columns] (AVX2), else [blockSize]
  int64_t columns = 0;                  // queries rounded up to 8
  std::vector<float> accScales;         // [queries] one block's accumulator factors
  std::vector<int64_t> counts;          // [queries] positions of the block each query takes
  int64_t blockSize = 0;
  std::vector<hd::SoftmaxState> states; // [queries]
  std::vector<float> q;                 // [queries, headDim] (rotated) queries
  // An f16 cache's keys and values of one kv head over one block, widened:
  // [blockSize, headDim] each, what the kernels read in place of the cache.
  std::vector<float> blockKeys, blockValues;

  void reserve(int64_t queries, const kv::KvLayerView &cache) {
    acc.resize(std::max<size_t>(acc.size(), queries * cache.headDim));
    q.resize(std::max<size_t>(q.size(), queries * cache.headDim));
    if (cache.isF16()) {
      blockKeys.resize(std::max<size_t>(blockKeys.size(), cache.blockSize * cache.headDim));
      blockValues.resize(std::max<size_t>(blockValues.size(), cache.blockSize * cache.headDim));
    }
    columns = std::max<int64_t>(columns, (queries + 7) / 8 * 8);
    scores.resize(std::max<size_t>(scores.size(), columns * cache.blockSize));
    accScales.resize(std::max<size_t>(accScales.size(), queries));
    counts.resize(std::max<size_t>(counts.size(), queries));
    blockSize = cache.blockSize;
    states.resize(std::max<size_t>(states.size(), queries));
  }
};

// attentionWeightsAvx2's step (attention_kernels.h) with hd::expF, for the
// ISAs without the block kernels.
float attentionWeightsPortable(float *s, int64_t count, float scale, float softcap,
                               hd::SoftmaxState &state) {
  float blockMax = -INFINITY;
  for (int64_t j = 0; j < count; ++j) {
    s[j] = hd::softCap(scale * s[j], softcap);
    blockMax = std::max(blockMax, s[j]);
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < count; ++j) {
    s[j] = hd::expF(s[j] - blockMax);
    sum += s[j];
  }
  const hd::SoftmaxMerge merged = hd::softmaxMerge(state, hd::SoftmaxState{blockMax, sum});
  state = merged.state;
  for (int64_t j = 0; j < count; ++j)
    s[j] *= merged.scaleB;
  return merged.scaleA;
}

// Where attendBlock reads one block's keys and values of a kv head: f32 rows
// (an f32 cache's, or an f16 cache's widened into the scratch), or an f16
// cache's rows in place.
struct BlockRows {
  const float *keys, *values;
  const uint16_t *keysF16, *valuesF16;
  int64_t stride; // elements from one position to the next

  // The rows from `positions` positions on.
  BlockRows skip(int64_t positions) const {
    const int64_t by = positions * stride;
    return keys != nullptr ? BlockRows{keys + by, values + by, nullptr, nullptr, stride}
                           : BlockRows{nullptr, nullptr, keysF16 + by, valuesF16 + by, stride};
  }
};

#if defined(__x86_64__)
// attendBlock's block kernels over f32 rows or an f16 cache's rows in place:
// a decode step's few query heads one query per row of scores, more of them
// 8 per vector (columns).
template <typename Element>
void attendWithBlockKernels(const AttentionBatch &b, Scratch &scratch, int64_t first, int64_t end,
                            const Element *keys, const Element *values, int64_t kvStride,
                            int64_t longest, int64_t dim) {
  const int64_t *counts = scratch.counts.data();
  float *scores = scratch.scores.data(), *accScale = scratch.accScales.data();
  const float *q = scratch.q.data() + first * dim;
  float *acc = scratch.acc.data() + first * dim;
  hd::SoftmaxState *states = scratch.states.data() + first;
  if (end - first < kMinColumnQueries) {
    detail::attentionScoresManyAvx2(q, dim, end - first, keys, kvStride, longest, dim, scores,
                                    scratch.blockSize);
    detail::attentionWeightsManyAvx2(scores, scratch.blockSize, end - first, counts + first,
                                     b.scale, b.scores.softcap, states, accScale);
    detail::attentionAccumulateManyAvx2(acc, accScale, scores, scratch.blockSize, end - first,
                                        values, kvStride, counts + first, dim);
    return;
  }
  const int64_t ldw = scratch.columns;
  detail::attentionScoresColumnsAvx2(q, dim, end - first, keys, kvStride, longest, dim, scores,
                                     ldw);
  detail::attentionWeightsColumnsAvx2(scores, ldw, end - first, counts + first, longest, b.scale,
                                      b.scores.softcap, states, accScale);
  detail::attentionAccumulateColumnsAvx2(acc, accScale, scores, ldw, end - first, values, kvStride,
                                         counts + first, dim);
}
#endif

// Queries [first, end) of a tile over the positions of a block from the
// same first one, query i over its own first scratch.counts[i] (at most
// `longest`; keys and values in `rows`): their scores,
// running softmaxes and accumulators. Each step runs for all of them before
// the next (every query's scores, then every query's weights, ...), so one
// query's exp latency overlaps the next one's dot products; each query's own
// operations are the ones it gets alone (the scores past a query's count are
// computed with the others' and not used).
void attendBlock(const detail::IsaOps &ops, bool blockKernels, const AttentionBatch &b,
                 Scratch &scratch, int64_t first, int64_t end, const BlockRows &rows,
                 int64_t longest, int64_t dim) {
  const int64_t *counts = scratch.counts.data();
  const float *keys = rows.keys, *values = rows.values;
  const int64_t kvStride = rows.stride;
#if defined(__x86_64__)
  if (blockKernels && rows.keysF16 != nullptr)
    return attendWithBlockKernels(b, scratch, first, end, rows.keysF16, rows.valuesF16, kvStride,
                                  longest, dim);
  if (blockKernels)
    return attendWithBlockKernels(b, scratch, first, end, keys, values, kvStride, longest, dim);
#endif
  (void)blockKernels;
  (void)longest;
  for (int64_t i = first; i < end; ++i) {
    const float *q = scratch.q.data() + i * dim;
    float *scores = scratch.scores.data(), *acc = scratch.acc.data() + i * dim;
    const int64_t count = counts[i];
    for (int64_t j = 0; j < count; ++j)
      scores[j] = ops.dot(q, keys + j * kvStride, dim);
    const float scale =
        attentionWeightsPortable(scores, count, b.scale, b.scores.softcap, scratch.states[i]);
    ops.scale(scale, acc, dim);
    for (int64_t j = 0; j < count; ++j)
      ops.axpy(scores[j], values + j * kvStride, acc, dim);
  }
}

// Cache blocks ahead of the one attended whose keys and values are fetched.
constexpr int64_t kPrefetchBlocks = 2;

// Prefetches kv head `kvHead`'s keys and values of the cache block that
// starts at position `start` (up to position `last`) into L2. A position's
// head is a few 64-byte lines, kvHeads * headDim floats from the next
// position's, so each position is on another 4 KiB page or nearly: the
// hardware prefetchers do not follow, and a decode step's attention waited
// on DRAM line by line. Reads only: no bit changes.
void prefetchBlock(const kv::KvLayerView &cache, const int32_t *blockTable, int64_t start,
                   int64_t last, int64_t kvHead) {
  if (start > last)
    return;
  const int64_t elementBytes = cache.isF16() ? 2 : 4;
  const int64_t headBytes = cache.headDim * elementBytes;
  const int64_t strideBytes = cache.kvHeads * headBytes;
  const int64_t baseBytes =
      (slotOffset(cache, blockTable, start) + kvHead * cache.headDim) * elementBytes;
  const char *keys = cache.isF16() ? reinterpret_cast<const char *>(cache.keysF16)
                                   : reinterpret_cast<const char *>(cache.keys);
  const char *values = cache.isF16() ? reinterpret_cast<const char *>(cache.valuesF16)
                                     : reinterpret_cast<const char *>(cache.values);
  const int64_t count = std::min<int64_t>(cache.blockSize - start % cache.blockSize,
                                          last + 1 - start);
  constexpr int64_t kLineBytes = detail::kCacheLineFloats * sizeof(float);
  for (int64_t j = 0; j < count; ++j)
    for (int64_t f = 0; f < headBytes; f += kLineBytes) {
      __builtin_prefetch(keys + baseBytes + j * strideBytes + f, 0, 2);
      __builtin_prefetch(values + baseBytes + j * strideBytes + f, 0, 2);
    }
}

// Positions [start, end) of one cache block, kv head `kvHead`: an f32
// cache's rows in place; an f16 cache's in place for the block kernels (they
// widen them as they load), else widened into the scratch for the portable path.
BlockRows blockRows(const kv::KvLayerView &cache, const int32_t *blockTable, int64_t start,
                    int64_t end, int64_t kvHead, bool blockKernels, Scratch &scratch) {
  const int64_t dim = cache.headDim, stride = cache.kvHeads * dim;
  const int64_t base = slotOffset(cache, blockTable, start) + kvHead * dim;
  if (!cache.isF16())
    return {cache.keys + base, cache.values + base, nullptr, nullptr, stride};
  if (blockKernels)
    return {nullptr, nullptr, cache.keysF16 + base, cache.valuesF16 + base, stride};
  for (int64_t j = 0; j < end - start; ++j) {
    f16ToF32Row(cache.keysF16 + base + j * stride, scratch.blockKeys.data() + j * dim, dim);
    f16ToF32Row(cache.valuesF16 + base + j * stride, scratch.blockValues.data() + j * dim, dim);
  }
  return {scratch.blockKeys.data(), scratch.blockValues.data(), nullptr, nullptr, dim};
}

// Whether heads of `dim` features take the AVX2 block kernels. AVX-512
// machines take them too, as they take the AVX2 int4 kernel: the portable
// path's per-position ops.dot / ops.axpy calls and scalar exp were 30% of a
// 110M f32 pp512 there (perf, docs/perf.md). Decode and prefill share the
// choice, so they keep summing alike on every machine.
bool runsBlockKernels(int64_t dim) {
#if defined(__x86_64__)
  return (activeIsa() == Isa::Avx2 || activeIsa() == Isa::Avx512) &&
         detail::attentionKernelsFit(dim);
#else
  (void)dim;
  return false;
#endif
}

// Attention of the `group` query heads of kv head `kvHead` for the tile's
// rows; scratch.q [rows * group, headDim] holds their queries (row r's head
// g at r * group + g). Block by block over the union of the rows' windows;
// each row takes the part of the block inside its own window, so a row sees
// the blocks, products and merges it would see attended alone (a decode step
// or any other tile): its bits do not depend on its neighbours.
void attendTile(const detail::IsaOps &ops, const AttentionBatch &b, const kv::KvLayerView &cache,
                const QueryTile &tile, int64_t kvHead, int64_t group, Scratch &scratch) {
  const int64_t dim = cache.headDim, bs = cache.blockSize, queries = tile.rows * group;
  const int32_t *blockTable = b.sequences[tile.sequence].blockTable;
  const int32_t *positions = b.positions + tile.firstRow;
  float *acc = scratch.acc.data();
  hd::SoftmaxState *state = scratch.states.data();
  std::fill(acc, acc + queries * dim, 0.0f);
  std::fill(state, state + queries, hd::softmaxEmpty());
  const bool blockKernels = runsBlockKernels(dim);
  int64_t first = positions[0], last = positions[0];
  for (int64_t r = 0; r < tile.rows; ++r) {
    first = std::min<int64_t>(first, hd::windowStart(positions[r], b.scores.window));
    last = std::max<int64_t>(last, positions[r]);
  }
  // `start` is the first position of each block in [first, last] (the first
  // one may begin inside a cache block).
  for (int64_t start = first; start <= last; start = (start / bs + 1) * bs) {
    const int64_t end = std::min((start / bs + 1) * bs, last + 1);
    prefetchBlock(cache, blockTable, end + (kPrefetchBlocks - 1) * bs, last, kvHead);
    const BlockRows rows = blockRows(cache, blockTable, start, end, kvHead, blockKernels, scratch);
    // Runs of rows whose part of the block starts at the same position go
    // together, each row to its own end (in a prefill's diagonal block the
    // rows end one after another).
    for (int64_t r = 0, next; r < tile.rows; r = next) {
      const int64_t from = std::max<int64_t>(start, hd::windowStart(positions[r], b.scores.window));
      int64_t longest = 0;
      for (next = r; next < tile.rows; ++next) {
        const int64_t to = std::min<int64_t>(end, positions[next] + 1);
        if (std::max<int64_t>(start, hd::windowStart(positions[next], b.scores.window)) != from ||
            to <= from)
          break;
        longest = std::max(longest, to - from);
        for (int64_t g = 0; g < group; ++g)
          scratch.counts[next * group + g] = to - from;
      }
      if (next == r) { // this row takes nothing of the block
        ++next;
        continue;
      }
      attendBlock(ops, blockKernels, b, scratch, r * group, next * group, rows.skip(from - start),
                  longest, dim);
    }
  }
  for (int64_t r = 0; r < tile.rows; ++r)
    for (int64_t g = 0; g < group; ++g) {
      const int64_t i = r * group + g;
      float *out = b.out + (tile.firstRow + r) * b.ldo + (kvHead * group + g) * dim;
      std::memcpy(out, acc + i * dim, dim * sizeof(float));
      ops.scale(hd::softmaxInvSum(state[i]), out, dim);
    }
}

// The tile's queries for kv head `kvHead` into scratch.q, rotated when the
// batch has a RoPE prologue.
void loadTileQueries(const AttentionBatch &b, const kv::KvLayerView &cache, const QueryTile &tile,
                     int64_t kvHead, int64_t group, Scratch &scratch) {
  const int64_t dim = cache.headDim;
  for (int64_t r = 0; r < tile.rows; ++r) {
    const int64_t row = tile.firstRow + r;
    const float *q = b.q + row * b.ldq + kvHead * group * dim;
    float *to = scratch.q.data() + r * group * dim;
    if (b.ropeTable != nullptr)
      rotateHeads(q, to, group, dim, rotaryDimOf(b, dim), b.ropeInterleaved,
                  b.ropeTable + ropeRow(b, row) * rotaryDimOf(b, dim));
    else
      std::memcpy(to, q, group * dim * sizeof(float));
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
        thread_local std::vector<float> rotated; // an f16 cache's key row before rounding
        for (int64_t row = begin; row < end; ++row) {
          const int64_t s = sequenceOfRow(b, row);
          if (s < 0)
            continue;
          int64_t slot = slotOffset(cache, b.sequences[s].blockTable, b.positions[row]);
          const float *key = b.k + row * b.ldk;
          if (b.ropeTable != nullptr) {
            // An f32 cache takes the rotated key in place; an f16 one (whose
            // f32 pointers are null) through the rotation row, then rounded.
            float *to = nullptr;
            if (cache.isF16()) {
              rotated.resize(rowFloats);
              to = rotated.data();
            } else {
              to = cache.keys + slot;
            }
            rotateHeads(key, to, cache.kvHeads, cache.headDim, rotaryDimOf(b, cache.headDim),
                        b.ropeInterleaved,
                        b.ropeTable + ropeRow(b, row) * rotaryDimOf(b, cache.headDim));
            key = to;
          }
          const float *value = b.v + row * b.ldv;
          if (cache.isF16()) {
            f32ToF16Row(key, cache.keysF16 + slot, rowFloats);
            f32ToF16Row(value, cache.valuesF16 + slot, rowFloats);
            continue;
          }
          if (key != cache.keys + slot)
            std::memcpy(cache.keys + slot, key, rowFloats * sizeof(float));
          std::memcpy(cache.values + slot, value, rowFloats * sizeof(float));
        }
      },
      kMinFloatsPerChunk / rowFloats + 1);
}

void pagedAttention(ThreadPool &pool, const AttentionBatch &b, const kv::KvLayerView &cache) {
  writeKvCache(pool, b, cache);
  if (b.numSequences == 0)
    return;
  const int64_t group = b.heads / cache.kvHeads, tileRows = rowsPerTile(group);
  const detail::IsaOps &ops = detail::activeOps();
  std::vector<QueryTile> tiles;
  // An item (tile, kv head) costs about (visible positions) * group * headDim
  // multiply-adds per row; chunks below kMinFloatsPerChunk are not worth a thread.
  int64_t work = 0;
  for (int64_t s = 0; s < b.numSequences; ++s) {
    const AttentionSequence &seq = b.sequences[s];
    for (int64_t r = seq.firstRow; r < seq.firstRow + seq.numRows; r += tileRows)
      tiles.push_back({s, r, std::min(tileRows, seq.firstRow + seq.numRows - r)});
    for (int64_t r = seq.firstRow; r < seq.firstRow + seq.numRows; ++r)
      work += (b.positions[r] + 1 - hd::windowStart(b.positions[r], b.scores.window)) * b.heads *
              cache.headDim;
  }
  // Items kv head by kv head: a thread's consecutive items read the same
  // head's keys and values (a sequence's are 2 * positions * headDim floats,
  // L2-sized, where all heads' would not be).
  const int64_t numTiles = static_cast<int64_t>(tiles.size());
  const int64_t items = numTiles * cache.kvHeads;
  const int64_t grain = kMinFloatsPerChunk * items / (work + 1) + 1;
  pool.parallelFor(
      items,
      [&](int64_t begin, int64_t end) {
        thread_local Scratch scratch;
        scratch.reserve(tileRows * group, cache);
        for (int64_t item = begin; item < end; ++item) {
          const QueryTile &tile = tiles[item % numTiles];
          const int64_t kvHead = item / numTiles;
          loadTileQueries(b, cache, tile, kvHead, group, scratch);
          attendTile(ops, b, cache, tile, kvHead, group, scratch);
        }
      },
      grain);
}

} // namespace llmc::cpu
