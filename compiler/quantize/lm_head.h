// `llmc build --quantize-lm-head`: after lowering, the vocabulary projection
// of the Logits and LmHead steps (lm_head.weight, or a tied embedding table)
// becomes int4 or int8 like the plan's Linear weights, so that a decode step
// reads about 4x (int4) or 2x (int8 from bf16) fewer bytes for it. The
// Linear kernels compute it (LogitsParams.weights, engine.fbs).
//
// int4 is round to nearest with zero points in groups of G (q4_quantize.h)
// whatever the plan's method: AWQ's scales would fold into the final norm and
// GPTQ needs the head's input statistics, neither of which the quantize stage
// collects for the head yet. int8 is quantize/int8.h's symmetric scheme.
// A tied table keeps its float rows for the embedding lookup (one row per
// token is read) and gets a quantized copy for the head; an untied one is
// replaced. A --synthetic-weights plan gets int4 parts whose synthetic rule
// codes the same generated matrix (SyntheticKind Q4*); int8 needs stored
// weights.
#pragma once

#include "plan_writer.h"
#include "support/status.h"
#include "support/thread_pool.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc::quant {

struct LmHeadQuantization {
  int matrices = 0;              // distinct matrices quantized (prefill and decode share one)
  int steps = 0;                 // Logits / LmHead steps that now read them
  uint64_t floatBytes = 0;       // the float matrices' bytes
  uint64_t quantizedBytes = 0;   // their quantized parts' bytes
};

// format: Q4 (groupSize a positive multiple of 32) or Q8 (groupSize 0 or a
// multiple of 32). New bytes live in `storage` until the plan is written.
Expected<LmHeadQuantization> quantizePlanLmHead(ThreadPool &pool, PlanContents &plan,
                                                fb::WeightFormat format, int64_t groupSize,
                                                std::vector<std::vector<uint8_t>> &storage);

} // namespace llmc::quant
