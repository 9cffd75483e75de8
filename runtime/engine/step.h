// The backend-neutral contract of one batch step: the new tokens of several
// sequences (prefill chunks and decode tokens alike) flattened into T rows,
// and for each row whose result is wanted, its own kind of output.
//
// Each output row asks for one of:
//   Argmax  the id of its largest logit (the first on ties): greedy decoding;
//   TopK    the top-k sampling candidates at its own k and temperature
//           (sampling::topKCandidates): a sampler that drawsFromTopK;
//   Logits  the full [V] f32 logits: any other sampling, logprobs, perplexity.
// so one step can serve requests with different sampling parameters.
//
// A backend computes each row's kind as cheaply as it can (a fused LmHead
// program writes argmax ids without logits; the CUDA backend computes top-k
// candidates on the device) and may hand back the logits of any row instead
// of its kind; Engine::run completes every row from those logits, so the
// caller of the engine always gets exactly what it asked for.
#pragma once

#include "kernels/common/sampling.h"

#include <cstdint>
#include <vector>

namespace llmc {

// One sequence's part of a step.
struct StepSequence {
  int64_t firstRow = 0;                // first of its rows among the step's T tokens
  int64_t numRows = 0;                 // its new tokens this step
  const int32_t *blockTable = nullptr; // covers all its positions up to the last new one
};

enum class OutputKind : uint8_t {
  Argmax, // ids[r]
  TopK,   // counts[r], and scores/candidates at r * kTopKCapacity when counts[r] <= capacity
  Logits, // logits row logitIndex[r]
};

// What one output row wants.
struct OutputRequest {
  int64_t row = 0; // among the step's T rows
  OutputKind kind = OutputKind::Logits;
  int32_t k = 0;            // TopK: 1 .. hd::kTopKMaxK, below the vocabulary size
  float temperature = 1.0f; // TopK: > 0
};

struct StepInput {
  const int32_t *tokens = nullptr;    // [T]
  const int32_t *positions = nullptr; // [T] position of each token in its sequence
  int64_t numTokens = 0;              // T
  std::vector<StepSequence> sequences;
  // The rows whose results are wanted, in the order of the results (e.g. the
  // last row of each sequence); at least one. A row may appear only once.
  std::vector<OutputRequest> outputs;
};

// The results of a step's output requests, R = outputs.size(), indexed like
// them. Buffers are reused from step to step.
struct StepOutput {
  // [R] for each row, which of its fields hold its result: its requested
  // kind, or Logits when the backend returned logits in its place (the
  // engine then computes the kind from them). A TopK row whose count is over
  // hd::kTopKCapacity also has logits (logitIndex[r] >= 0).
  std::vector<OutputKind> filled;
  std::vector<int32_t> ids;        // [R] Argmax rows
  std::vector<int32_t> counts;     // [R] TopK rows
  std::vector<float> scores;       // [R, kTopKCapacity] TopK rows
  std::vector<int32_t> candidates; // [R, kTopKCapacity] TopK rows, token ids
  // [R] the row of `logits` holding row r's logits, or -1 when none came back.
  std::vector<int64_t> logitIndex;
  const float *logits = nullptr; // host [rows with logits, V] f32, valid until the next step
  int64_t vocab = 0;

  // Sizes the per-row fields for `rows` rows, nothing filled yet.
  void reset(size_t rows) {
    filled.assign(rows, OutputKind::Logits);
    ids.assign(rows, -1);
    counts.assign(rows, 0);
    scores.resize(rows * hd::kTopKCapacity);
    candidates.resize(rows * hd::kTopKCapacity);
    logitIndex.assign(rows, -1);
    logits = nullptr;
  }
  const float *logitsOf(size_t r) const {
    return logitIndex[r] < 0 ? nullptr : logits + logitIndex[r] * vocab;
  }
  const float *scoresOf(size_t r) const { return scores.data() + r * hd::kTopKCapacity; }
  const int32_t *candidatesOf(size_t r) const { return candidates.data() + r * hd::kTopKCapacity; }
};

} // namespace llmc
