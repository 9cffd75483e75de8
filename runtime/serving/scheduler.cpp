#include "serving/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace llmc::serving {

const char *finishReasonName(FinishReason reason) {
  switch (reason) {
  case FinishReason::None:
    return "";
  case FinishReason::Stop:
    return "stop";
  case FinishReason::Length:
    return "length";
  case FinishReason::Abort:
    return "abort";
  case FinishReason::Error:
    return "error";
  }
  return "";
}

struct Scheduler::Request {
  Request(RequestParams p, sampling::Sampler s) : params(std::move(p)), sampler(std::move(s)) {}

  RequestId id = 0;
  RequestParams params;
  sampling::Sampler sampler;
  // Prompt + generated: what the sequence must hold before the next token
  // is sampled. After a preemption it is all recomputed.
  std::vector<int32_t> tokens;
  int64_t generated = 0;
  // promptLogprobs >= 0: the entries so far (entry i: prompt token i + 1),
  // handed out with the first token.
  std::vector<sampling::SampledLogprobs> promptLogprobs;
  bool promptLogprobsSent = false;
  bool hasSequence = false;
  SequenceId sequence = 0;
  int64_t computed = 0; // tokens of `tokens` the sequence holds in the KV cache
  int64_t admittedAt = 0;
  bool everAdmitted = false;
  int64_t cachedPromptTokens = 0;
  bool running = false;
};

namespace {

Status badField(const std::string &field, const std::string &value, const std::string &expected) {
  return Status::error(field + " is " + value + "; expected " + expected);
}

} // namespace

Scheduler::Scheduler(Engine &engine, const SchedulerConfig &config)
    : engine_(&engine), config_(config) {}

Scheduler::~Scheduler() {
  for (auto &[id, request] : requests_)
    if (request->hasSequence)
      (void)engine_->releaseSequence(request->sequence);
}

Expected<std::unique_ptr<Scheduler>> Scheduler::create(Engine &engine,
                                                       const SchedulerConfig &config) {
  if (config.maxNumBatchedTokens < 1)
    return badField("max_num_batched_tokens", std::to_string(config.maxNumBatchedTokens),
                    "an integer >= 1");
  if (config.maxNumSeqs < 1)
    return badField("max_num_seqs", std::to_string(config.maxNumSeqs), "an integer >= 1");
  std::unique_ptr<Scheduler> s(new Scheduler(engine, config));
  engine.setPrefixCaching(config.prefixCaching);
  s->usableBlocks_ = engine.usableBlocks();
  if (!engine.model().eos_token_ids())
    return s;
  for (int64_t eos : *engine.model().eos_token_ids())
    s->eosIds_.push_back(eos);
  return s;
}

int64_t Scheduler::blocksFor(int64_t tokens) const {
  const int64_t blockSize = engine_->backend().blockSize();
  return (tokens + blockSize - 1) / blockSize;
}

Status Scheduler::validate(const RequestParams &p) const {
  const int64_t vocab = engine_->vocabSize();
  const int64_t maxLen = engine_->model().max_seq_len();
  if (p.prompt.empty())
    return Status::error("prompt is empty; expected at least one token");
  for (size_t i = 0; i < p.prompt.size(); ++i)
    if (p.prompt[i] < 0 || p.prompt[i] >= vocab)
      return badField("prompt token " + std::to_string(i), std::to_string(p.prompt[i]),
                      "an id in [0, " + std::to_string(vocab) + ")");
  if (p.maxTokens < 1)
    return badField("max_tokens", std::to_string(p.maxTokens), "an integer >= 1");
  if (p.sampling.minTokens < 0 || p.sampling.minTokens > p.maxTokens)
    return badField("min_tokens", std::to_string(p.sampling.minTokens),
                    "an integer in [0, max_tokens " + std::to_string(p.maxTokens) + "]");
  const int64_t total = static_cast<int64_t>(p.prompt.size()) + p.maxTokens;
  if (total > maxLen)
    return Status::error("the prompt (" + std::to_string(p.prompt.size()) +
                         " tokens) + max_tokens (" + std::to_string(p.maxTokens) +
                         ") = " + std::to_string(total) +
                         " tokens is over the model's context of " + std::to_string(maxLen) +
                         " tokens; shorten the prompt or lower max_tokens");
  // The last generated token is never fed back, so the sequence holds total - 1 tokens at most.
  if (blocksFor(total - 1) > usableBlocks_)
    return Status::error("the prompt + max_tokens (" + std::to_string(total) +
                         " tokens) needs more KV cache than the whole pool holds (" +
                         std::to_string(usableBlocks_ * engine_->backend().blockSize()) +
                         " tokens); lower max_tokens or start the server with a larger KV cache");
  for (int32_t id : p.stopTokenIds)
    if (id < 0 || id >= vocab)
      return badField("stop token id", std::to_string(id),
                      "an id in [0, " + std::to_string(vocab) + ")");
  if (p.promptLogprobs < -1 || p.promptLogprobs > sampling::kMaxLogprobs)
    return badField("prompt_logprobs", std::to_string(p.promptLogprobs),
                    "-1 (off) or an integer in [0, " + std::to_string(sampling::kMaxLogprobs) +
                        "]");
  auto sampler = sampling::Sampler::create(p.sampling);
  if (!sampler)
    return sampler.status();
  return Status::ok();
}

Expected<RequestId> Scheduler::add(RequestParams params) {
  LLMC_RETURN_IF_ERROR(validate(params));
  // The ids that end the request are the ones min_tokens keeps from being drawn.
  params.sampling.stopTokenIds = params.stopTokenIds;
  if (!params.ignoreEos)
    for (int64_t eos : eosIds_)
      params.sampling.stopTokenIds.push_back(static_cast<int32_t>(eos));
  LLMC_ASSIGN_OR_RETURN(sampling::Sampler sampler, sampling::Sampler::create(params.sampling));
  auto request = std::make_unique<Request>(std::move(params), std::move(sampler));
  request->id = nextId_++;
  request->tokens = request->params.prompt;
  Request *raw = request.get();
  requests_.emplace(raw->id, std::move(request));
  waiting_.push_back(raw);
  return raw->id;
}

void Scheduler::abort(RequestId id) {
  if (requests_.count(id) != 0)
    abortsPending_.push_back(id);
}

bool Scheduler::hasWork() const {
  return !running_.empty() || !waiting_.empty() || !abortsPending_.empty();
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s = counters_;
  s.running = static_cast<int64_t>(running_.size());
  s.waiting = static_cast<int64_t>(waiting_.size());
  const int64_t available = engine_->availableBlocks();
  s.kvUsage =
      usableBlocks_ > 0 ? static_cast<double>(usableBlocks_ - available) / usableBlocks_ : 0;
  return s;
}

std::vector<RequestId> Scheduler::runningIds() const {
  std::vector<RequestId> ids;
  for (const Request *r : running_)
    ids.push_back(r->id);
  return ids;
}

std::vector<RequestId> Scheduler::waitingIds() const {
  std::vector<RequestId> ids;
  for (const Request *r : waiting_)
    ids.push_back(r->id);
  return ids;
}

void Scheduler::finish(Request &request, FinishReason reason, std::vector<TokenEvent> &events,
                       TokenEvent event) {
  if (request.hasSequence) // its blocks return to the pool now
    (void)engine_->releaseSequence(request.sequence);
  request.hasSequence = false;
  if (request.running)
    running_.erase(std::find(running_.begin(), running_.end(), &request));
  else
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &request));
  event.id = request.id;
  event.finished = true;
  event.reason = reason;
  event.promptTokens = static_cast<int64_t>(request.params.prompt.size());
  event.generatedTokens = request.generated;
  event.cachedPromptTokens = request.cachedPromptTokens;
  events.push_back(std::move(event));
  if (reason == FinishReason::Abort)
    ++counters_.aborted;
  else if (reason != FinishReason::Error)
    ++counters_.finished;
  requests_.erase(request.id);
}

void Scheduler::applyAborts(std::vector<TokenEvent> &events) {
  std::vector<RequestId> ids;
  ids.swap(abortsPending_);
  for (RequestId id : ids) {
    auto it = requests_.find(id);
    if (it != requests_.end())
      finish(*it->second, FinishReason::Abort, events, TokenEvent{});
  }
}

void Scheduler::preempt(Request &request) {
  (void)engine_->releaseSequence(request.sequence);
  request.hasSequence = false;
  request.computed = 0;
  request.running = false;
  running_.erase(std::find(running_.begin(), running_.end(), &request));
  waiting_.push_front(&request); // first in line again, prompt + generated recomputed
  ++counters_.preemptions;
}

// Gives a waiting request a sequence that shares its cached prefix.
void Scheduler::admit(Request &request) {
  request.sequence = engine_->addSequence();
  request.hasSequence = true;
  request.computed = 0;
  // Prompt logprobs need the logits of every prompt position: none is taken
  // from the cache until they are all out.
  if (request.params.promptLogprobs >= 0 && !request.promptLogprobsSent)
    return;
  auto cached = engine_->attachCachedPrefix(request.sequence, request.tokens);
  request.computed = cached ? *cached : 0;
}

// Whether `r` (waiting) starts with a full block that one of `computing`
// (admitted in this step) computes now rather than attaches from the cache.
// A request that needs prompt logprobs attaches nothing, so never waits.
bool Scheduler::waitsForSharedPrefix(const Request &r,
                                     const std::vector<const Request *> &computing) const {
  if (r.params.promptLogprobs >= 0 && !r.promptLogprobsSent)
    return false;
  const int64_t blockSize = engine_->backend().blockSize();
  const int64_t size = static_cast<int64_t>(r.tokens.size());
  for (const Request *q : computing) {
    const int64_t limit = std::min<int64_t>(size - 1, static_cast<int64_t>(q->tokens.size()));
    if (limit < blockSize || !std::equal(r.tokens.begin(), r.tokens.begin() + blockSize,
                                         q->tokens.begin()))
      continue; // not even the first block in common
    int64_t common = blockSize;
    while (common < limit && r.tokens[common] == q->tokens[common])
      ++common;
    if (common / blockSize * blockSize > q->computed)
      return true;
  }
  return false;
}

std::vector<Scheduler::Scheduled> Scheduler::schedule() {
  std::vector<Scheduled> scheduled;
  int64_t budget = config_.maxNumBatchedTokens;
  int64_t planned = 0; // blocks the scheduled requests take from the pool
  bool preempted = false;
  // Running requests first, oldest admission first; when the pool cannot
  // hold one, the most recently admitted running request makes room.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Request &r = *running_[i];
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(r.tokens.size()) - r.computed, budget);
    const int64_t need = engine_->blocksToGrow(r.sequence, n);
    if (planned + need > engine_->availableBlocks()) {
      Request &victim = *running_.back();
      preempt(victim);
      preempted = true;
      if (&victim == &r)
        break;
      continue; // retry the same request with the freed blocks
    }
    scheduled.push_back({&r, n});
    planned += need;
    budget -= n;
    ++i;
  }
  // Then waiting requests in order, unless this step had to preempt (the
  // pool is short: admitting now would only preempt again). A request whose
  // prompt starts with full blocks that a request admitted in this step
  // computes (they are not cached yet) waits one step and then attaches
  // them from the cache instead of computing them again: 64 requests with
  // one system prompt compute it once, not once per request of the first
  // step. Its place in the queue is kept; the requests after it go on.
  std::vector<const Request *> computing; // admitted now, computing full prompt blocks
  for (size_t w = 0; !preempted && w < waiting_.size() && budget > 0 &&
                     static_cast<int64_t>(running_.size()) < config_.maxNumSeqs;) {
    Request &r = *waiting_[w];
    if (config_.prefixCaching && waitsForSharedPrefix(r, computing)) {
      ++w;
      continue;
    }
    admit(r);
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(r.tokens.size()) - r.computed, budget);
    const int64_t need = engine_->blocksToGrow(r.sequence, n);
    if (planned + need > engine_->availableBlocks()) {
      // Give back the shared prefix blocks (they stay cached) until it fits.
      (void)engine_->releaseSequence(r.sequence);
      r.hasSequence = false;
      r.computed = 0;
      break;
    }
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(w));
    r.running = true;
    r.admittedAt = ++admissions_;
    running_.push_back(&r);
    if (config_.prefixCaching) {
      counters_.prefixQueries += static_cast<int64_t>(r.tokens.size());
      counters_.prefixHits += r.computed;
      if (n >= engine_->backend().blockSize()) // computes full prompt blocks (computed is block-aligned)
        computing.push_back(&r);
    }
    if (!r.everAdmitted) {
      r.everAdmitted = true;
      r.cachedPromptTokens = r.computed;
      counters_.promptTokens += static_cast<int64_t>(r.params.prompt.size());
    }
    scheduled.push_back({&r, n});
    planned += need;
    budget -= n;
  }
  return scheduled;
}

namespace {

bool contains(const std::vector<int32_t> &ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

} // namespace

std::vector<TokenEvent> Scheduler::step() {
  std::vector<TokenEvent> events;
  applyAborts(events);
  lastStepTokens_ = 0;
  engine_->setPrefixCaching(config_.prefixCaching); // another scheduler may have changed it
  std::vector<Scheduled> scheduled = schedule();
  if (scheduled.empty())
    return events;
  const int64_t vocab = engine_->vocabSize();
  std::vector<SequenceTokens> batch;
  std::vector<OutputRequest> outputs;
  std::vector<int64_t> outputOf(scheduled.size(), -1); // index into outputs, or -1 (mid-prefill)
  int64_t row = 0;
  for (size_t i = 0; i < scheduled.size(); ++i) {
    Request &r = *scheduled[i].request;
    const int64_t n = scheduled[i].numTokens;
    batch.push_back({r.sequence, std::vector<int32_t>(r.tokens.begin() + r.computed,
                                                      r.tokens.begin() + r.computed + n)});
    row += n;
    if (r.computed + n < static_cast<int64_t>(r.tokens.size()))
      continue; // a prefill chunk that does not reach the end samples nothing
    OutputRequest o;
    o.row = row - 1;
    if (r.sampler.picksArgmax(r.generated))
      o.kind = OutputKind::Argmax;
    else if (r.sampler.drawsFromTopK(static_cast<int32_t>(vocab), r.generated)) {
      o.kind = OutputKind::TopK;
      o.k = r.params.sampling.topK;
      o.temperature = r.params.sampling.temperature;
    }
    outputOf[i] = static_cast<int64_t>(outputs.size());
    outputs.push_back(o);
  }
  // Prompt logprobs: the logits of the chunk's rows that predict a prompt
  // token not yet scored (the row at position q predicts prompt[q + 1]).
  std::vector<std::pair<size_t, size_t>> promptRows(scheduled.size(), {0, 0}); // [begin, end)
  row = 0;
  for (size_t i = 0; i < scheduled.size(); ++i) {
    Request &r = *scheduled[i].request;
    const int64_t n = scheduled[i].numTokens;
    promptRows[i] = {outputs.size(), outputs.size()};
    if (r.params.promptLogprobs >= 0 && !r.promptLogprobsSent) {
      const int64_t lastScoring = static_cast<int64_t>(r.params.prompt.size()) - 2;
      for (int64_t q = static_cast<int64_t>(r.promptLogprobs.size());
           q <= lastScoring && q < r.computed + n; ++q)
        if (q >= r.computed)
          outputs.push_back({row + q - r.computed, OutputKind::Logits});
      promptRows[i].second = outputs.size();
    }
    row += n;
  }
  lastStepTokens_ = row;
  // A step whose every request is mid-prefill still runs (for its KV) with
  // one throwaway output row.
  const bool throwaway = outputs.empty();
  if (throwaway)
    outputs.push_back({row - 1, OutputKind::Argmax});
  auto ran = engine_->run(batch, outputs);
  if (!ran) {
    std::vector<Request *> failed = running_;
    for (Request *r : failed) {
      TokenEvent event;
      event.error = ran.message();
      finish(*r, FinishReason::Error, events, std::move(event));
    }
    return events;
  }
  const StepOutput &out = **ran;
  for (size_t i = 0; i < scheduled.size(); ++i) {
    Request &r = *scheduled[i].request;
    for (size_t o = promptRows[i].first; o < promptRows[i].second; ++o)
      scorePromptToken(r, out, o);
    r.computed += scheduled[i].numTokens;
    if (outputOf[i] >= 0)
      emit(r, out, static_cast<size_t>(outputOf[i]), events);
  }
  return events;
}

// The raw logprob of the next prompt token at output row `index`.
void Scheduler::scorePromptToken(Request &r, const StepOutput &out, size_t index) {
  const int32_t vocab = static_cast<int32_t>(engine_->vocabSize());
  const int32_t token = r.params.prompt[r.promptLogprobs.size() + 1];
  sampling::SampledLogprobs entry;
  sampling::rawLogprobs(out.logitsOf(index), vocab, token, r.params.promptLogprobs, entry);
  r.promptLogprobs.push_back(std::move(entry));
}

// Samples row `index` of the step for `request` and turns it into an event.
void Scheduler::emit(Request &r, const StepOutput &out, size_t index,
                     std::vector<TokenEvent> &events) {
  const RequestParams &p = r.params;
  const int32_t vocab = static_cast<int32_t>(engine_->vocabSize());
  int32_t token = 0;
  TokenEvent event;
  sampling::SampledLogprobs logprobs;
  if (out.filled[index] == OutputKind::Argmax) {
    token = out.ids[index];
  } else if (out.filled[index] == OutputKind::TopK && out.counts[index] <= hd::kTopKCapacity) {
    token = r.sampler.sampleTopK(out.scoresOf(index), out.candidatesOf(index), out.counts[index],
                                 vocab);
  } else {
    const sampling::TokenHistory history{r.tokens.data(), static_cast<int64_t>(r.tokens.size()),
                                         static_cast<int64_t>(p.prompt.size())};
    token = r.sampler.sample(out.logitsOf(index), vocab, history,
                             p.sampling.logprobs >= 0 ? &logprobs : nullptr);
    if (p.sampling.logprobs >= 0) {
      event.logprob = logprobs.chosen.logprob;
      for (const sampling::TokenLogprob &t : logprobs.top)
        event.topLogprobs.emplace_back(t.id, t.logprob);
    }
  }
  if (p.promptLogprobs >= 0 && !r.promptLogprobsSent) {
    event.promptLogprobs = std::move(r.promptLogprobs);
    r.promptLogprobs.clear();
    r.promptLogprobsSent = true;
  }
  const bool stops = r.generated >= p.sampling.minTokens &&
                     contains(p.sampling.stopTokenIds, token);
  if (stops) {
    event.stopToken = token;
    finish(r, FinishReason::Stop, events, std::move(event));
    return;
  }
  r.tokens.push_back(token);
  ++r.generated;
  ++counters_.generationTokens;
  event.token = token;
  if (r.generated >= p.maxTokens ||
      static_cast<int64_t>(r.tokens.size()) >= engine_->model().max_seq_len()) {
    finish(r, FinishReason::Length, events, std::move(event));
    return;
  }
  event.id = r.id;
  event.promptTokens = static_cast<int64_t>(p.prompt.size());
  event.generatedTokens = r.generated;
  event.cachedPromptTokens = r.cachedPromptTokens;
  events.push_back(std::move(event));
}

} // namespace llmc::serving
