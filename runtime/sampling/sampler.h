// Picks the next token from a row of logits, with the semantics of Hugging
// Face generate: repetition penalty, then temperature, top-k, top-p, min-p
// (in that order), then a draw from the softmax of what is left.
// Temperature 0 is greedy (after the repetition penalty).
//
// Each sequence owns a Sampler: its random generator (xoshiro256**, seeded by
// splitmix64 from `seed`) makes the same seed and the same logits give the
// same tokens on every machine.
#pragma once

#include "support/status.h"

#include <cstdint>
#include <vector>

namespace llmc::sampling {

struct SamplingParams {
  float temperature = 1.0f;       // 0: greedy
  int32_t topK = 0;               // 0: off
  float topP = 1.0f;              // 1: off; in (0, 1]
  float minP = 0.0f;              // 0: off; in [0, 1]
  float repetitionPenalty = 1.0f; // 1: off; > 0
  uint64_t seed = 0;
};

// xoshiro256** (Blackman & Vigna), seeded through splitmix64.
class Rng {
public:
  explicit Rng(uint64_t seed);
  uint64_t next();
  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
  uint64_t s_[4];
};

class Sampler {
public:
  // Fails, naming the field, when a parameter is out of range.
  static Expected<Sampler> create(const SamplingParams &params);

  const SamplingParams &params() const { return params_; }

  // logits: [vocab]. seen: the tokens of the sequence so far (prompt and
  // generated), for the repetition penalty; ids outside [0, vocab) are
  // ignored. Buffers are reused between calls.
  int32_t sample(const float *logits, int32_t vocab, const int32_t *seen, int64_t numSeen);

  // Whether sampleTopK can stand in for sample(): top-k on (1 <= k <=
  // kTopKMaxK, k < vocab), a temperature > 0, no repetition penalty.
  bool drawsFromTopK(int32_t vocab) const;
  // The same token sample() would pick from the full logits (and the same
  // state change), from the top-k candidates of the logits only: scores and
  // ids as topKCandidates gives them (count <= kTopKCapacity).
  int32_t sampleTopK(const float *scores, const int32_t *ids, int32_t count, int32_t vocab);

private:
  explicit Sampler(const SamplingParams &params) : params_(params), rng_(params.seed) {}

  void applyTopK();
  void applyTopP(float maxScore);
  void applyMinP(float maxScore);
  int32_t draw(float maxScore);

  SamplingParams params_;
  Rng rng_;
  std::vector<float> scores_;       // [vocab] processed logits
  std::vector<int32_t> candidates_; // token ids still in play
  bool sorted_ = false;             // candidates_ in descending score order
  std::vector<float> probs_;        // scratch for top-p
};

// The top-k candidates of a row of logits: every token whose sampling score
// (hd::samplingScore at `temperature`) is >= the k-th largest, sorted by
// score descending then id. Returns their count; scores[] and ids[] (room for
// kTopKCapacity) are filled only when it is at most kTopKCapacity. The CUDA
// top-k kernel computes the same.
int32_t topKCandidates(const float *logits, int32_t vocab, int32_t k, float temperature,
                       float *scores, int32_t *ids);

} // namespace llmc::sampling
