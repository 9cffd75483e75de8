#include "memory_planner.h"

#include <algorithm>
#include <numeric>

namespace llmc {

MemoryPlan planMemory(const std::vector<BufferLifetime> &buffers, uint64_t alignment) {
  MemoryPlan plan;
  plan.offsetPerToken.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return buffers[a].firstStep < buffers[b].firstStep;
  });
  struct Placed {
    uint64_t begin, end;
    int lastStep;
  };
  std::vector<Placed> live; // sorted by begin
  for (size_t index : order) {
    const BufferLifetime &buffer = buffers[index];
    // Drop buffers whose last use is before this one is written.
    live.erase(std::remove_if(live.begin(), live.end(),
                              [&](const Placed &p) { return p.lastStep < buffer.firstStep; }),
               live.end());
    uint64_t size = (buffer.bytesPerToken + alignment - 1) / alignment * alignment;
    uint64_t offset = 0;
    for (const Placed &p : live) { // first gap that fits
      if (p.begin >= offset + size)
        break;
      offset = std::max(offset, p.end);
    }
    plan.offsetPerToken[index] = offset;
    plan.arenaBytesPerToken = std::max(plan.arenaBytesPerToken, offset + size);
    Placed placed{offset, offset + size, buffer.lastStep};
    live.insert(std::upper_bound(live.begin(), live.end(), placed,
                                 [](const Placed &a, const Placed &b) { return a.begin < b.begin; }),
                placed);
  }
  return plan;
}

} // namespace llmc
