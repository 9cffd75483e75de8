#include "sampling/sampler.h"

#include "kernels/common/sampling.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>

namespace llmc::sampling {
namespace {

uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

Status badField(const char *field, float value, const char *expected) {
  return Status::error(std::string("sampling: field '") + field + "': expected " + expected +
                       ", got " + std::to_string(value));
}

// Descending score order; equal scores in token order.
struct HigherScore {
  const std::vector<float> &scores;
  bool operator()(int32_t a, int32_t b) const {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  }
};

// The first index of the largest score (torch.argmax).
int32_t argmaxOf(const std::vector<float> &scores) {
  return static_cast<int32_t>(std::max_element(scores.begin(), scores.end()) - scores.begin());
}

} // namespace

Rng::Rng(uint64_t seed) {
  for (uint64_t &word : s_)
    word = splitmix64(seed);
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

Expected<Sampler> Sampler::create(const SamplingParams &p) {
  if (!(p.temperature >= 0.0f) || std::isinf(p.temperature))
    return badField("temperature", p.temperature, "a finite number >= 0");
  if (p.topK < 0)
    return badField("top_k", static_cast<float>(p.topK), "an integer >= 0");
  if (!(p.topP > 0.0f && p.topP <= 1.0f))
    return badField("top_p", p.topP, "a number in (0, 1]");
  if (!(p.minP >= 0.0f && p.minP <= 1.0f))
    return badField("min_p", p.minP, "a number in [0, 1]");
  if (!(p.repetitionPenalty > 0.0f) || std::isinf(p.repetitionPenalty))
    return badField("repetition_penalty", p.repetitionPenalty, "a finite number > 0");
  if (!(p.frequencyPenalty >= -2.0f && p.frequencyPenalty <= 2.0f))
    return badField("frequency_penalty", p.frequencyPenalty, "a number in [-2, 2]");
  if (!(p.presencePenalty >= -2.0f && p.presencePenalty <= 2.0f))
    return badField("presence_penalty", p.presencePenalty, "a number in [-2, 2]");
  if (p.minTokens < 0)
    return badField("min_tokens", static_cast<float>(p.minTokens), "an integer >= 0");
  if (p.logprobs < -1 || p.logprobs > kMaxLogprobs)
    return badField("logprobs", static_cast<float>(p.logprobs),
                    "an integer in [0, 20] (or -1: off)");
  return Sampler(p);
}

// scores_ = logits after the min_tokens mask and the penalties (NaN as -inf).
void Sampler::applyPenalties(const float *logits, int32_t vocab, const TokenHistory &history) {
  scores_.assign(logits, logits + vocab);
  if (params_.repetitionPenalty != 1.0f)
    for (int64_t i = 0; i < history.size; ++i) {
      const int32_t t = history.ids[i];
      if (t >= 0 && t < vocab) // from the raw logit: once per distinct token
        scores_[t] = hd::repetitionPenalty(logits[t], params_.repetitionPenalty);
    }
  if (params_.frequencyPenalty != 0.0f || params_.presencePenalty != 0.0f) {
    counts_.resize(vocab, 0);
    const int32_t *generated = history.ids + history.promptSize;
    for (int64_t i = 0; i < history.generated(); ++i)
      if (generated[i] >= 0 && generated[i] < vocab)
        ++counts_[generated[i]];
    for (int64_t i = 0; i < history.generated(); ++i) {
      const int32_t t = generated[i];
      if (t < 0 || t >= vocab || counts_[t] == 0)
        continue; // outside, or already penalized
      scores_[t] -= params_.frequencyPenalty * static_cast<float>(counts_[t]) +
                    params_.presencePenalty;
      counts_[t] = 0; // back to zero for the next call
    }
  }
  if (history.generated() < params_.minTokens)
    for (int32_t t : params_.stopTokenIds)
      if (t >= 0 && t < vocab)
        scores_[t] = -INFINITY;
  for (float &s : scores_) // a NaN logit (a broken model) is never picked
    if (std::isnan(s))
      s = -INFINITY;
}

int32_t Sampler::sample(const float *logits, int32_t vocab, const TokenHistory &history,
                        SampledLogprobs *logprobs) {
  const int32_t token = pick(logits, vocab, history);
  if (logprobs != nullptr && params_.logprobs >= 0)
    rawLogprobs(logits, vocab, token, params_.logprobs, *logprobs);
  return token;
}

int32_t Sampler::pick(const float *logits, int32_t vocab, const TokenHistory &history) {
  applyPenalties(logits, vocab, history);
  if (params_.temperature == 0.0f)
    return argmaxOf(scores_);
  if (params_.temperature != 1.0f)
    for (float &s : scores_)
      s /= params_.temperature;
  const float maxScore = *std::max_element(scores_.begin(), scores_.end());
  if (!(maxScore > -INFINITY)) // nothing finite to draw from
    return argmaxOf(scores_);
  candidates_.resize(vocab);
  std::iota(candidates_.begin(), candidates_.end(), 0);
  sorted_ = false;
  if (params_.topK > 0 && params_.topK < vocab)
    applyTopK();
  if (params_.topP < 1.0f)
    applyTopP(maxScore);
  if (params_.minP > 0.0f)
    applyMinP(maxScore);
  return draw(maxScore);
}

void rawLogprobs(const float *logits, int32_t vocab, int32_t token, int32_t top,
                 SampledLogprobs &out) {
  auto score = [&](int32_t t) { return std::isnan(logits[t]) ? -INFINITY : logits[t]; };
  float maxScore = -INFINITY;
  for (int32_t t = 0; t < vocab; ++t)
    maxScore = std::max(maxScore, score(t));
  double total = 0.0;
  if (maxScore > -INFINITY)
    for (int32_t t = 0; t < vocab; ++t)
      total += std::exp(static_cast<double>(score(t)) - maxScore);
  const double logTotal = maxScore > -INFINITY ? maxScore + std::log(total) : 0.0;
  auto logprobOf = [&](int32_t t) {
    return maxScore > -INFINITY ? static_cast<float>(score(t) - logTotal) : -INFINITY;
  };
  out.chosen = {token, token >= 0 && token < vocab ? logprobOf(token) : -INFINITY};
  out.top.clear();
  const int32_t n = std::min(top, vocab);
  if (n <= 0)
    return;
  // The n best by a bounded insertion (n <= 20): one pass over the row.
  std::vector<int32_t> best;
  best.reserve(n + 1);
  auto better = [&](int32_t a, int32_t b) {
    return score(a) > score(b) || (score(a) == score(b) && a < b);
  };
  for (int32_t t = 0; t < vocab; ++t) {
    if (static_cast<int32_t>(best.size()) == n && !better(t, best.back()))
      continue;
    best.insert(std::upper_bound(best.begin(), best.end(), t, better), t);
    if (static_cast<int32_t>(best.size()) > n)
      best.pop_back();
  }
  for (int32_t t : best) {
    if (!(score(t) > -INFINITY))
      break;
    out.top.push_back({t, logprobOf(t)});
  }
}

bool Sampler::picksArgmax(int64_t generated) const {
  return params_.temperature == 0.0f && params_.repetitionPenalty == 1.0f &&
         params_.frequencyPenalty == 0.0f && params_.presencePenalty == 0.0f &&
         !minTokensMaskOn(generated) && params_.logprobs < 0;
}

bool Sampler::drawsFromTopK(int32_t vocab, int64_t generated) const {
  return params_.temperature > 0.0f && params_.repetitionPenalty == 1.0f &&
         params_.frequencyPenalty == 0.0f && params_.presencePenalty == 0.0f &&
         !minTokensMaskOn(generated) && params_.logprobs < 0 && params_.topK > 0 &&
         params_.topK <= hd::kTopKMaxK && params_.topK < vocab;
}

// sample() after applyTopK, from the candidates: the same scores, in the
// same order, through the same filters and draw.
int32_t Sampler::sampleTopK(const float *scores, const int32_t *ids, int32_t count,
                            int32_t vocab) {
  if (static_cast<int32_t>(scores_.size()) != vocab)
    scores_.resize(vocab); // only the candidates' entries are read
  for (int32_t i = 0; i < count; ++i)
    scores_[ids[i]] = scores[i];
  const float maxScore = scores[0];
  candidates_.assign(ids, ids + count);
  sorted_ = true;
  if (!(maxScore > -INFINITY)) // nothing finite: sample()'s argmax, the first of the ties
    return ids[0];
  if (params_.topP < 1.0f)
    applyTopP(maxScore);
  if (params_.minP > 0.0f)
    applyMinP(maxScore);
  return draw(maxScore);
}

int32_t topKCandidates(const float *logits, int32_t vocab, int32_t k, float temperature,
                       float *scores, int32_t *ids) {
  std::vector<float> all(vocab);
  for (int32_t v = 0; v < vocab; ++v)
    all[v] = hd::samplingScore(logits[v], temperature);
  std::vector<float> order(all);
  std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), std::greater<float>());
  const float kth = order[k - 1];
  int32_t count = 0;
  for (int32_t v = 0; v < vocab; ++v)
    if (hd::topKKeeps(all[v], kth)) {
      if (count < hd::kTopKCapacity)
        ids[count] = v;
      ++count;
    }
  if (count > hd::kTopKCapacity)
    return count;
  const HigherScore higher{all};
  std::sort(ids, ids + count, higher);
  for (int32_t i = 0; i < count; ++i)
    scores[i] = all[ids[i]];
  return count;
}

// Keeps the tokens scoring >= the k-th largest score, sorted descending.
void Sampler::applyTopK() {
  const HigherScore higher{scores_};
  const int32_t k = params_.topK;
  std::nth_element(candidates_.begin(), candidates_.begin() + (k - 1), candidates_.end(), higher);
  const float kth = scores_[candidates_[k - 1]];
  auto keptEnd = std::partition(candidates_.begin(), candidates_.end(),
                                [&](int32_t t) { return hd::topKKeeps(scores_[t], kth); });
  candidates_.erase(keptEnd, candidates_.end());
  std::sort(candidates_.begin(), candidates_.end(), higher);
  sorted_ = true;
}

// Keeps the smallest descending prefix whose probability mass (over the
// candidates) reaches topP. After top-k the candidates are few and sorted;
// otherwise a weighted quickselect finds the cut without sorting the
// vocabulary: partition around a pivot into higher / equal / lower scores,
// and either recurse into the higher side (the cut is there), or count the
// higher and equal sides as kept and recurse into the lower side.
void Sampler::applyTopP(float maxScore) {
  double total = 0.0;
  for (int32_t t : candidates_)
    total += std::exp(scores_[t] - maxScore);
  auto prob = [&](int32_t t) {
    return static_cast<float>(std::exp(scores_[t] - maxScore) / total);
  };
  auto massOf = [&](const int32_t *begin, const int32_t *end) {
    double mass = 0.0;
    for (const int32_t *t = begin; t < end; ++t)
      mass += std::exp(scores_[*t] - maxScore) / total;
    return mass;
  };
  // Keeps the prefix of the sorted range [lo, hi) that top-p keeps, given the
  // mass before it; the candidates after it are dropped.
  auto cutSorted = [&](int64_t lo, int64_t hi, double before) {
    probs_.resize(hi - lo);
    for (int64_t i = lo; i < hi; ++i)
      probs_[i - lo] = prob(candidates_[i]);
    int kept = hd::topPKeepCount(probs_.data(), static_cast<int>(hi - lo), params_.topP,
                                 static_cast<float>(before));
    candidates_.resize(lo + kept);
  };
  if (sorted_)
    return cutSorted(0, static_cast<int64_t>(candidates_.size()), 0.0);
  const HigherScore higher{scores_};
  int32_t *data = candidates_.data();
  int64_t lo = 0, hi = static_cast<int64_t>(candidates_.size());
  double before = 0.0; // mass of the candidates ahead of [lo, hi), all kept
  while (hi - lo > 64) {
    if (lo > 0 && before >= params_.topP)
      return candidates_.resize(lo);
    float a = scores_[data[lo]], b = scores_[data[(lo + hi) / 2]], c = scores_[data[hi - 1]];
    float pivot = std::max(std::min(a, b), std::min(std::max(a, b), c)); // median of three
    int32_t *greaterEnd =
        std::partition(data + lo, data + hi, [&](int32_t t) { return scores_[t] > pivot; });
    int32_t *equalEnd =
        std::partition(greaterEnd, data + hi, [&](int32_t t) { return scores_[t] == pivot; });
    double greater = massOf(data + lo, greaterEnd);
    if (before + greater >= params_.topP && greaterEnd > data + lo) {
      hi = greaterEnd - data; // the cut is inside the greater side
      continue;
    }
    double equal = massOf(greaterEnd, equalEnd);
    if (before + greater + equal >= params_.topP) { // the cut is among the ties
      std::sort(greaterEnd, equalEnd);              // ties in token order
      return cutSorted(greaterEnd - data, equalEnd - data, before + greater);
    }
    before += greater + equal;
    lo = equalEnd - data;
  }
  std::sort(data + lo, data + hi, higher);
  cutSorted(lo, hi, before);
}

void Sampler::applyMinP(float maxScore) {
  auto dropped = std::remove_if(candidates_.begin(), candidates_.end(), [&](int32_t t) {
    return !hd::minPKeeps(scores_[t], maxScore, params_.minP);
  });
  candidates_.erase(dropped, candidates_.end());
}

// Draws from softmax over the candidates (the best one always remains).
int32_t Sampler::draw(float maxScore) {
  double total = 0.0;
  for (int32_t t : candidates_)
    total += std::exp(scores_[t] - maxScore);
  double target = rng_.uniform() * total;
  double cumulative = 0.0;
  for (int32_t t : candidates_) {
    cumulative += std::exp(scores_[t] - maxScore);
    if (cumulative > target)
      return t;
  }
  return candidates_.back();
}

} // namespace llmc::sampling
