// Causal attention over the paged KV cache, for a batch of sequences whose
// step tokens are flattened into T rows (prefill chunks and decode tokens
// alike). Keys and values are read only through each sequence's block table
// (kv/kv_cache.h gives the layout), never assumed contiguous.
#pragma once

#include "kernels/common/attention_scores.h"
#include "kv/kv_cache.h"
#include "support/thread_pool.h"

#include <cstdint>

namespace llmc::cpu {

// One sequence of the batch step.
struct AttentionSequence {
  int64_t firstRow;          // its first token's row in q/k/v/out
  int64_t numRows;           // its tokens in this step
  const int32_t *blockTable; // covers every position up to the largest in this step
};
// Positions [0, positions[t]] of a row's sequence must be in the cache once
// this step's k/v are written (earlier steps wrote the rest).

struct AttentionBatch {
  const float *q; // [T, ldq], row t holds heads x headDim (RoPE applied)
  int64_t ldq;
  const float *k; // [T, ldk], row t holds kvHeads x headDim: the step's new keys
  int64_t ldk;
  const float *v; // [T, ldv], the step's new values
  int64_t ldv;
  float *out; // [T, ldo], row t receives heads x headDim
  int64_t ldo;
  const int32_t *positions;           // [T] position of each row in its sequence
  const AttentionSequence *sequences; // in row order, disjoint
  int64_t numSequences;
  int64_t heads; // a multiple of cache.kvHeads; head h reads kv head h / (heads / kvHeads)
  float scale;   // usually 1 / sqrt(headDim)
  // The RoPE prologue (null: q and k are used as they are): q and k are
  // rotated on the fly with row positions[t] of this table (cpu::ropeTable,
  // rows of ropeRotaryDim floats), k as it is written to the cache; q and k
  // themselves are left unchanged. The first ropeRotaryDim features of each
  // head rotate (0: all of them), as pairs (i, i + ropeRotaryDim / 2) or,
  // ropeInterleaved, (2i, 2i + 1) (kernels/common/rope.h ropePairFeatures).
  const float *ropeTable = nullptr;
  // The ropeTable row of each row (null: positions[t]); a per-step table of
  // dynamic/longrope frequencies is indexed by row instead.
  const int32_t *ropeRows = nullptr;
  int64_t ropeRotaryDim = 0;
  bool ropeInterleaved = false;
  // Sliding window and soft-capping (kernels/common/attention_scores.h);
  // zero-initialized: plain causal attention.
  hd::AttentionScores scores{};
};

// Copies the step's k (rotated with a ropeTable) and v rows into their cache
// slots (position p goes to slot p % blockSize of block blockTable[p / blockSize]),
// rounded to f16 for an f16 cache; attention then reads those rounded values.
void writeKvCache(ThreadPool &pool, const AttentionBatch &batch, const kv::KvLayerView &cache);

// Writes the step's k/v into the cache, then for every row t and head h:
//   out[t, h] = softmax_j(softCap(scale * q[t, h] . K[j])) V[j] over cached
//   positions windowStart(positions[t]) <= j <= positions[t] of the row's
//   sequence,
// with an online softmax over blocks (kernels/common/online_softmax.h; on
// AVX2 the weights' exp is cpu/attention_exp.h's, 8 lanes at a time).
// Cache slots before the window are never read: a block wholly before it may
// have been released (its table entry is then not looked at).
// Rows not covered by a sequence are left untouched. Runs in parallel over
// (kv head, query tile): a tile's consecutive rows of one sequence and the
// query heads of a group share each K/V block read. A row's output has the
// same bits whatever the tile, batch, step split or thread count.
void pagedAttention(ThreadPool &pool, const AttentionBatch &batch, const kv::KvLayerView &cache);

} // namespace llmc::cpu
