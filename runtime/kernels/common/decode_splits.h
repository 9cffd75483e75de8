// How flash-decoding splits one sequence's positions [0, context) among at
// most `maxSplits` blocks (the grid's split axis, fixed when the plan is
// built): whole chunks of `chunk` positions, as few per split as the context
// allows, so a short context still spreads over many blocks and a long one
// over all of them. Chosen at run time from the sequence's actual context
// (the kernel reads it from the step's positions, so one captured CUDA graph
// serves every context length); splits at or past `count` have no positions.
#pragma once

#include "kernels/common/hd.h"

namespace llmc::hd {

struct DecodeSplits {
  int length; // positions per split, a multiple of chunk (>= chunk)
  int count;  // splits that hold positions: ceil(context / length) <= maxSplits
};

LLMC_HD inline DecodeSplits decodeSplits(int context, int maxSplits, int chunk) {
  const int perSplit = (context + maxSplits - 1) / maxSplits;
  int length = (perSplit + chunk - 1) / chunk * chunk;
  if (length < chunk)
    length = chunk;
  return {length, (context + length - 1) / length};
}

} // namespace llmc::hd
