#include "kv/window_retention.h"

#include "kernels/common/attention_scores.h"

#include <algorithm>
#include <string>

namespace llmc::kv {

Expected<int64_t> firstRetainedPosition(const std::vector<int32_t> &layerWindows,
                                        int64_t nextPosition) {
  if (layerWindows.empty() || nextPosition <= 0)
    return int64_t{0};
  int32_t widest = 0;
  for (size_t layer = 0; layer < layerWindows.size(); ++layer) {
    const int32_t window = layerWindows[layer];
    if (window < 0)
      return Status::error("KV cache: layer " + std::to_string(layer) + " has window " +
                           std::to_string(window) + ": expected 0 (global) or a positive size");
    if (window == 0)
      return int64_t{0}; // a global layer reads every position
    widest = std::max(widest, window);
  }
  return nextPosition >= widest ? nextPosition - widest + 1 : 0;
}

Expected<int64_t> releaseOutOfWindowBlocks(BlockTable &table, BlockPool &pool,
                                           const std::vector<int32_t> &layerWindows,
                                           int64_t nextPosition) {
  auto first = firstRetainedPosition(layerWindows, nextPosition);
  if (!first)
    return first.status();
  return table.releaseBefore(pool, *first);
}

} // namespace llmc::kv
