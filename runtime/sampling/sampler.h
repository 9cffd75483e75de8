// Picks the next token from a row of logits, with the semantics of Hugging
// Face generate and vLLM: the min_tokens mask, the repetition penalty (over
// prompt and generated tokens), the frequency and presence penalties (OpenAI:
// over generated tokens only), then temperature, top-k, top-p, min-p (in that
// order), then a draw from the softmax of what is left. Temperature 0 is
// greedy (after the mask and the penalties).
//
// Logprobs are those of the model's raw distribution, as OpenAI's API and
// vLLM (its default logprobs_mode=raw_logprobs) report them: the
// log-softmax of the logits as the model gave them, before the mask, the
// penalties, the temperature and the top-k / top-p / min-p cuts. The chosen
// token's logprob is its raw one whatever the draw; the top list ranks the
// whole vocabulary by raw logit. The CLI (llmrun --logprobs) and the server
// (logprobs, top_logprobs, echo's prompt logprobs) report the same numbers.
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
  float frequencyPenalty = 0.0f; // 0: off; in [-2, 2]; x count of each generated token
  float presencePenalty = 0.0f;  // 0: off; in [-2, 2]; once per distinct generated token
  // The stop tokens (EOS and extra stop ids) cannot be drawn before
  // minTokens tokens have been generated.
  int64_t minTokens = 0; // >= 0
  std::vector<int32_t> stopTokenIds;
  // -1: no logprobs; 0: the chosen token's only; N: also the N most likely
  // (at most kMaxLogprobs).
  int32_t logprobs = -1;
};

constexpr int32_t kMaxLogprobs = 20; // OpenAI's and vLLM's default limit

// The tokens of a sequence so far: its prompt, then what it generated.
struct TokenHistory {
  const int32_t *ids = nullptr; // [size]
  int64_t size = 0;
  int64_t promptSize = 0; // ids[promptSize:] were generated
  int64_t generated() const { return size - promptSize; }
};

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;
};

// One token's logprobs, in the raw distribution.
struct SampledLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top; // the most likely first, at most params.logprobs
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

// The raw logprobs at one row of logits (log-softmax; a NaN logit counts
// as -inf): `token`'s, and the `top` most likely tokens (most likely first,
// ties in id order; tokens of probability 0 are not listed).
void rawLogprobs(const float *logits, int32_t vocab, int32_t token, int32_t top,
                 SampledLogprobs &out);

class Sampler {
public:
  // Fails, naming the field, when a parameter is out of range.
  static Expected<Sampler> create(const SamplingParams &params);

  const SamplingParams &params() const { return params_; }

  // logits: [vocab]. history: the tokens of the sequence so far, for the
  // penalties and min_tokens; ids outside [0, vocab) are ignored. Fills
  // `logprobs` when params.logprobs >= 0 and it is not null. Buffers are
  // reused between calls.
  int32_t sample(const float *logits, int32_t vocab, const TokenHistory &history,
                 SampledLogprobs *logprobs = nullptr);
  // The same with every seen token counted as prompt (no frequency or
  // presence penalty, no min_tokens mask).
  int32_t sample(const float *logits, int32_t vocab, const int32_t *seen, int64_t numSeen) {
    return sample(logits, vocab, TokenHistory{seen, numSeen, numSeen});
  }

  // Whether the next token of a sequence that generated `generated` tokens
  // so far is the plain argmax of its logits: temperature 0, no penalty, no
  // min_tokens mask in force, no logprobs (a step can then ask the backend
  // for OutputKind::Argmax alone).
  bool picksArgmax(int64_t generated) const;
  // Whether sampleTopK can stand in for sample() for that token: top-k on
  // (1 <= k <= kTopKMaxK, k < vocab), a temperature > 0, no penalty, no
  // min_tokens mask in force, no logprobs (raw logprobs need the full row).
  bool drawsFromTopK(int32_t vocab, int64_t generated = 0) const;
  // The same token sample() would pick from the full logits (and the same
  // state change), from the top-k candidates of the logits only: scores and
  // ids as topKCandidates gives them (count <= kTopKCapacity).
  int32_t sampleTopK(const float *scores, const int32_t *ids, int32_t count, int32_t vocab);

private:
  explicit Sampler(const SamplingParams &params) : params_(params), rng_(params.seed) {}

  // sample() without the logprobs.
  int32_t pick(const float *logits, int32_t vocab, const TokenHistory &history);
  void applyTopK();
  void applyTopP(float maxScore);
  void applyMinP(float maxScore);
  int32_t draw(float maxScore);
  void applyPenalties(const float *logits, int32_t vocab, const TokenHistory &history);
  bool minTokensMaskOn(int64_t generated) const {
    return generated < params_.minTokens && !params_.stopTokenIds.empty();
  }

  SamplingParams params_;
  Rng rng_;
  std::vector<float> scores_;       // [vocab] processed logits
  std::vector<int32_t> candidates_; // token ids still in play
  bool sorted_ = false;             // candidates_ in descending score order
  std::vector<float> probs_;        // scratch for top-p
  std::vector<int32_t> counts_;     // [vocab] generated-token counts, zero between calls
};

// The top-k candidates of a row of logits: every token whose sampling score
// (hd::samplingScore at `temperature`) is >= the k-th largest, sorted by
// score descending then id. Returns their count; scores[] and ids[] (room for
// kTopKCapacity) are filled only when it is at most kTopKCapacity. The CUDA
// top-k kernel computes the same.
int32_t topKCandidates(const float *logits, int32_t vocab, int32_t k, float temperature,
                       float *scores, int32_t *ids);

} // namespace llmc::sampling
