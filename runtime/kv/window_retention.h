// Which KV slots a sequence still needs when attention layers have sliding
// windows (Mistral, Qwen2 with use_sliding_window, Gemma2's local layers;
// kernels/common/attention_scores.h): a query at position q reads keys
// q - window < j <= q, and a sequence's later queries are at nextPosition or
// after, so every slot before nextPosition - window + 1 of the widest window
// is dead, but only when every layer has one: a global layer (window 0)
// keeps the whole history. The block holding the first needed slot stays.
#pragma once

#include "kv/block_pool.h"
#include "support/status.h"

#include <cstdint>
#include <vector>

namespace llmc::kv {

// The first position any layer reads for queries at nextPosition or later
// (layerWindows: each layer's window, 0 for a global layer). 0 when a layer
// is global or there are no layers; fails on a negative window.
Expected<int64_t> firstRetainedPosition(const std::vector<int32_t> &layerWindows,
                                        int64_t nextPosition);

// Releases the blocks of `table` that no layer reads again once the
// sequence's next query is at nextPosition (the tokens it holds so far: the
// first row of its next step, prefill chunk or decode). Returns how many
// blocks it released; none when a layer is global. Call it between steps,
// after the step that wrote position nextPosition - 1 (the scheduler owns
// the pool), never while a kernel reads the table.
Expected<int64_t> releaseOutOfWindowBlocks(BlockTable &table, BlockPool &pool,
                                           const std::vector<int32_t> &layerWindows,
                                           int64_t nextPosition);

} // namespace llmc::kv
