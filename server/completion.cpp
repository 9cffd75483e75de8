#include "server/completion.h"

#if LLMC_SERVER_HAVE_CHAT
#include "chat/chat_template.h"
#endif
#include "generation/text_stream.h"
#include "server/connection_probe.h"

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <random>

namespace llmc::server {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string dumpJson(const Json &j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// "cmpl-" / "chatcmpl-" and 24 random hex digits.
std::string responseId(Endpoint endpoint) {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  char hex[25];
  std::snprintf(hex, sizeof hex, "%016llx%08llx", static_cast<unsigned long long>(random()),
                static_cast<unsigned long long>(random() & 0xffffffffULL));
  return (endpoint == Endpoint::Completions ? "cmpl-" : "chatcmpl-") + std::string(hex);
}

int64_t unixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One prompt, tokenized, with the text echo gives back.
struct PreparedPrompt {
  std::vector<int32_t> ids;
  std::string text;
};

// A token's own text for logprobs: what it adds after `previous` (so a
// SentencePiece word start keeps its space), else its decode alone.
std::string tokenText(const Tokenizer &tokenizer, int32_t previous, int32_t id) {
  if (previous >= 0) {
    std::string before = tokenizer.decode({previous});
    std::string both = tokenizer.decode({previous, id});
    if (both.compare(0, before.size(), before) == 0)
      return both.substr(before.size());
  }
  return tokenizer.decode({id});
}

struct TokenRecord {
  int32_t id;
  float logprob;
  std::vector<std::pair<int32_t, float>> top;
  size_t textOffset;     // bytes of text before this token (echo with logprobs: from the prompt's token texts)
  int32_t previous = -1; // the token before it, -1 none (for its text)
  bool hasLogprob = true; // false: the first prompt token of an echo (null in the JSON)
  std::string text;       // tokenText(previous, id), the text the logprobs list for it
};

// One choice: one serving request and what the client has seen of it.
struct Choice {
  size_t index = 0;
  serving::RequestId id = 0;
  PreparedPrompt *prompt = nullptr;
  std::unique_ptr<generation::TextStream> text;
  std::deque<std::pair<serving::TokenEvent, Clock::time_point>> inbox; // under Exchange::mutex

  bool done = false;          // the client's view is complete (finish reason known)
  bool loopFinished = false;  // the loop sent its final event
  std::string finishReason;
  std::string error;
  int64_t completionTokens = 0;
  int64_t cachedTokens = 0;
  std::vector<TokenRecord> tokens; // when logprobs were asked
  size_t echoedTokensText = 0;     // echo with logprobs: bytes of the prompt's token texts
  size_t generatedTokensText = 0;  // logprobs: bytes of the generated tokens' texts so far
  size_t tokensSent = 0;           // streaming: logprob records already written
  std::string pending;             // streaming: visible text not yet written
  bool roleSent = false;           // chat streaming: the first delta went out
  int32_t lastToken = -1;
  Clock::time_point lastTokenTime;
  bool sawToken = false;
};

// Every choice of one HTTP request. Held by the HTTP thread and by each
// choice's loop callback (shared_ptr), so it outlives whichever ends last.
struct Exchange {
  std::mutex mutex;
  std::condition_variable wake;
  std::vector<Choice> choices;
  std::vector<PreparedPrompt> prompts;
  GenerationRequest request;
  Clock::time_point arrival;
  std::string id;
  int64_t created = 0;
  std::string model;
};

struct Handler {
  GenerationContext context; // by value: a stream outlives the route handler that made it
  std::shared_ptr<Exchange> exchange;

  const Tokenizer &tokenizer() const { return context.engine.tokenizer(); }
  int64_t contextLength() const { return context.engine.model().max_seq_len(); }

  std::optional<ApiError> tokenize();
  std::optional<ApiError> renderChat(std::string &prompt) const;
  std::optional<ApiError> checkLength(const PreparedPrompt &prompt, int64_t &maxTokens) const;
  serving::RequestParams paramsFor(const PreparedPrompt &prompt, int64_t maxTokens,
                                   size_t choiceIndex) const;
  std::optional<ApiError> submit();
  void cancelUnfinished();

  // Moves the loop's events into the choices; returns whether any arrived.
  bool absorbEvents(std::chrono::milliseconds wait);
  void absorb(Choice &choice, const serving::TokenEvent &event, Clock::time_point when);
  void recordPrompt(Choice &choice, const serving::TokenEvent &event);
  bool echoesLogprobs() const { return exchange->request.echo && exchange->request.logprobs; }
  void finishChoice(Choice &choice, const std::string &reason);
  bool allDone() const;

  Json usage() const;
  Json completionLogprobs(const Choice &choice, size_t from, size_t to) const;
  Json chatLogprobs(const Choice &choice, size_t from, size_t to) const;
  Json fullResponse() const;
  std::vector<std::string> streamChunks(bool final);
  std::string chunk(Json choices, bool withUsageNull) const;
};

std::optional<ApiError> Handler::renderChat(std::string &prompt) const {
  const ServerOptions &options = context.options;
  if (!options.chatTemplate)
    return badRequest("messages", options.chatTemplateMissing);
#if !LLMC_SERVER_HAVE_CHAT
  return badRequest("messages", "this llmc was built without the chat-template engine "
                                "(runtime/chat); chat completions are not available");
#else
  Json variables = exchange->request.chatTemplateKwargs;
  // The special-token strings: the plan's (tokenizer_config.json), else the
  // tokenizer's BOS / EOS tokens.
  const Tokenizer &tok = tokenizer();
  const fb::TokenizerInfo &info = *context.engine.plan().meta().tokenizer();
  auto special = [&](const flatbuffers::String *fromPlan, std::optional<int32_t> id) {
    if (fromPlan != nullptr)
      return fromPlan->str();
    std::optional<std::string> text = id ? tok.idToToken(*id) : std::nullopt;
    return text ? *text : std::string();
  };
  if (!variables.contains("bos_token"))
    variables["bos_token"] = special(info.bos_token(), tok.bosId());
  if (!variables.contains("eos_token"))
    variables["eos_token"] = special(info.eos_token(), tok.eosId());
  Expected<std::string> rendered = chat::renderChatTemplate(
      *options.chatTemplate, exchange->request.messages, variables,
      exchange->request.addGenerationPrompt);
  if (!rendered)
    return badRequest("messages", "the chat template failed on these messages: " +
                                      rendered.message());
  prompt = std::move(*rendered);
  return std::nullopt;
#endif
}

std::optional<ApiError> Handler::tokenize() {
  GenerationRequest &request = exchange->request;
  const Tokenizer &tok = tokenizer();
  const int64_t vocab = context.engine.vocabSize();
  if (request.endpoint == Endpoint::ChatCompletions) {
    std::string text;
    if (auto error = renderChat(text))
      return error;
    // The template writes the special tokens it wants (BOS included), as
    // vLLM's chat endpoint assumes.
    PreparedPrompt prompt{tok.encode(text, false), text};
    if (prompt.ids.empty())
      return badRequest("messages", "the chat template rendered these messages to no tokens");
    exchange->prompts.push_back(std::move(prompt));
    return std::nullopt;
  }
  for (size_t i = 0; i < request.prompts.size(); ++i) {
    const PromptInput &input = request.prompts[i];
    PreparedPrompt prompt;
    if (input.isTokens) {
      for (int64_t id : input.tokens) {
        if (id >= vocab)
          return badRequest("prompt", "token id " + std::to_string(id) +
                                          " is outside the vocabulary [0, " +
                                          std::to_string(vocab) + ")");
        prompt.ids.push_back(static_cast<int32_t>(id));
      }
      prompt.text = tok.decode(prompt.ids, false);
    } else {
      prompt.ids = tok.encode(input.text, true);
      prompt.text = input.text;
    }
    if (prompt.ids.empty())
      return badRequest("prompt", "prompt " + std::to_string(i) + " encodes to no tokens");
    exchange->prompts.push_back(std::move(prompt));
  }
  return std::nullopt;
}

// Prompt + max_tokens must fit the context: never a silent truncation.
std::optional<ApiError> Handler::checkLength(const PreparedPrompt &prompt,
                                             int64_t &maxTokens) const {
  const GenerationRequest &request = exchange->request;
  const int64_t length = contextLength();
  const int64_t promptTokens = static_cast<int64_t>(prompt.ids.size());
  const char *promptField = request.endpoint == Endpoint::Completions ? "prompt" : "messages";
  if (promptTokens >= length)
    return badRequest(promptField, "this model's maximum context length is " +
                                       std::to_string(length) + " tokens, but the prompt has " +
                                       std::to_string(promptTokens) +
                                       " tokens; shorten the prompt");
  if (request.maxTokens) {
    maxTokens = *request.maxTokens;
    if (promptTokens + maxTokens > length) {
      const char *field = request.endpoint == Endpoint::Completions ? "max_tokens"
                                                                    : "max_completion_tokens";
      return badRequest(field, "this model's maximum context length is " +
                                   std::to_string(length) + " tokens, but you requested " +
                                   std::to_string(promptTokens + maxTokens) + " tokens (" +
                                   std::to_string(promptTokens) + " in the prompt, " +
                                   std::to_string(maxTokens) +
                                   " for the completion); reduce the prompt or " + field);
    }
  } else {
    // OpenAI's defaults: 16 for completions, the rest of the context for
    // chat; the plan's max_new_tokens lowers them (vLLM's rule).
    int64_t room = length - promptTokens;
    maxTokens = request.endpoint == Endpoint::Completions ? std::min<int64_t>(16, room) : room;
    const fb::GenerationDefaults *defaults = context.engine.plan().meta().generation();
    if (defaults != nullptr && defaults->max_new_tokens().value_or(0) > 0)
      maxTokens = std::min(maxTokens, *defaults->max_new_tokens());
  }
  if (request.minTokens > maxTokens)
    return badRequest("min_tokens", "min_tokens (" + std::to_string(request.minTokens) +
                                        ") is more than the " + std::to_string(maxTokens) +
                                        " tokens this completion may have");
  return std::nullopt;
}

serving::RequestParams Handler::paramsFor(const PreparedPrompt &prompt, int64_t maxTokens,
                                          size_t choiceIndex) const {
  const GenerationRequest &request = exchange->request;
  serving::RequestParams params;
  params.prompt = prompt.ids;
  params.maxTokens = maxTokens;
  params.ignoreEos = request.ignoreEos;
  for (int64_t id : request.stopTokenIds)
    params.stopTokenIds.push_back(static_cast<int32_t>(id));
  params.promptLogprobs = echoesLogprobs() ? static_cast<int32_t>(request.topLogprobs) : -1;
  sampling::SamplingParams &s = params.sampling;
  s.minTokens = request.minTokens;
  s.presencePenalty = request.presencePenalty;
  s.frequencyPenalty = request.frequencyPenalty;
  s.logprobs = request.logprobs ? static_cast<int32_t>(request.topLogprobs) : -1;
  s.temperature = request.temperature;
  s.topK = static_cast<int32_t>(request.topK);
  s.topP = request.topP;
  s.minP = request.minP;
  s.repetitionPenalty = request.repetitionPenalty;
  applyGenerationDefaults(context.engine.plan().meta().generation(), request.given, s);
  // Each choice draws its own tokens: with a seed, seed + choice index (so
  // the same request gives the same choices); without, a random seed.
  static thread_local std::mt19937_64 random{std::random_device{}()};
  s.seed = request.seed ? *request.seed + choiceIndex : random();
  return params;
}

std::optional<ApiError> Handler::submit() {
  const GenerationRequest &request = exchange->request;
  std::vector<int64_t> maxTokens(exchange->prompts.size());
  for (size_t p = 0; p < exchange->prompts.size(); ++p)
    if (auto error = checkLength(exchange->prompts[p], maxTokens[p]))
      return error;
  const size_t n = static_cast<size_t>(request.n);
  exchange->choices.resize(exchange->prompts.size() * n);
  for (size_t p = 0; p < exchange->prompts.size(); ++p)
    for (size_t j = 0; j < n; ++j) {
      Choice &choice = exchange->choices[p * n + j];
      choice.index = p * n + j;
      choice.prompt = &exchange->prompts[p];
      choice.text = std::make_unique<generation::TextStream>(
          tokenizer(), choice.prompt->ids, request.stop, request.skipSpecialTokens);
      choice.lastToken = choice.prompt->ids.back();
    }
  std::weak_ptr<Exchange> weak = exchange;
  for (Choice &choice : exchange->choices) {
    size_t index = choice.index;
    std::shared_ptr<Exchange> shared = exchange;
    auto callback = [shared, index](const serving::TokenEvent &event) {
      {
        std::lock_guard<std::mutex> lock(shared->mutex);
        shared->choices[index].inbox.emplace_back(event, Clock::now());
      }
      shared->wake.notify_all();
    };
    serving::SubmitResult result = context.loop.submit(
        paramsFor(*choice.prompt, maxTokens[index / n], index), std::move(callback));
    if (result.status != serving::SubmitStatus::Accepted) {
      cancelUnfinished();
      switch (result.status) {
      case serving::SubmitStatus::InvalidRequest:
        return badRequest("", result.message);
      case serving::SubmitStatus::QueueFull:
        return unavailable("the server is at capacity (waiting queue full: " + result.message +
                           "); retry later");
      case serving::SubmitStatus::ShuttingDown:
        return unavailable("the server is shutting down");
      case serving::SubmitStatus::Accepted:
        break;
      }
    }
    std::lock_guard<std::mutex> lock(exchange->mutex);
    choice.id = result.id;
  }
  return std::nullopt;
}

void Handler::cancelUnfinished() {
  for (Choice &choice : exchange->choices)
    if (choice.id != 0 && !choice.loopFinished)
      context.loop.cancel(choice.id);
}

bool Handler::allDone() const {
  for (const Choice &choice : exchange->choices)
    if (!choice.done)
      return false;
  return true;
}

void Handler::finishChoice(Choice &choice, const std::string &reason) {
  if (choice.done)
    return;
  choice.done = true;
  choice.finishReason = reason;
  if (!choice.text->stopped()) {
    // The text held back at the end may complete a stop string.
    choice.pending += choice.text->finish();
    if (choice.text->stopped())
      choice.finishReason = "stop";
  }
  if (choice.finishReason == "stop")
    context.metrics.successStop++;
  else if (choice.finishReason == "length")
    context.metrics.successLength++;
  else if (choice.finishReason == "abort")
    context.metrics.successAbort++;
  else
    context.metrics.successError++;
  context.metrics.e2eLatency.observe(
      std::chrono::duration<double>(Clock::now() - exchange->arrival).count());
}

void Handler::absorb(Choice &choice, const serving::TokenEvent &event, Clock::time_point when) {
  if (event.finished)
    choice.loopFinished = true;
  if (choice.done)
    return; // a stop string ended it; the loop's later events do not count
  if (!event.promptLogprobs.empty() || (echoesLogprobs() && !choice.roleSent))
    recordPrompt(choice, event);
  if (event.token >= 0) {
    double sinceArrival = std::chrono::duration<double>(when - exchange->arrival).count();
    if (!choice.sawToken)
      context.metrics.timeToFirstToken.observe(sinceArrival);
    else
      context.metrics.interTokenLatency.observe(
          std::chrono::duration<double>(when - choice.lastTokenTime).count());
    choice.sawToken = true;
    choice.lastTokenTime = when;
    choice.cachedTokens = event.cachedPromptTokens;
    ++choice.completionTokens;
    if (exchange->request.logprobs) {
      // Offsets count the token texts the logprobs list (as OpenAI and vLLM
      // give them), not the visible text: a token that ends inside a UTF-8
      // character is listed with its own text while the stream holds its
      // bytes back.
      const int32_t previous =
          choice.lastToken >= 0 ? choice.lastToken : choice.prompt->ids.back();
      std::string text = tokenText(tokenizer(), previous, event.token);
      const size_t offset = choice.echoedTokensText + choice.generatedTokensText;
      choice.generatedTokensText += text.size();
      choice.tokens.push_back({event.token, event.logprob, event.topLogprobs, offset, previous,
                               true, std::move(text)});
    }
    bool mayStop = choice.completionTokens >= exchange->request.minTokens;
    generation::TextStream::Update update = choice.text->push(event.token, mayStop);
    choice.pending += update.text;
    choice.lastToken = event.token;
    if (update.stopped) {
      finishChoice(choice, "stop");
      if (!choice.loopFinished)
        context.loop.cancel(choice.id);
      return;
    }
  }
  if (event.finished) {
    switch (event.reason) {
    case serving::FinishReason::Stop:
      return finishChoice(choice, "stop");
    case serving::FinishReason::Length:
      return finishChoice(choice, "length");
    case serving::FinishReason::None:
    case serving::FinishReason::Abort:
      return finishChoice(choice, "abort");
    case serving::FinishReason::Error:
      choice.error = event.error;
      return finishChoice(choice, "error");
    }
  }
}

// Echo with logprobs: the prompt's tokens lead the choice's records (the
// first with null logprobs, as OpenAI and vLLM give it), and its text is
// streamed with them. `roleSent` marks it done (completions have no role).
void Handler::recordPrompt(Choice &choice, const serving::TokenEvent &event) {
  choice.roleSent = true;
  const std::vector<int32_t> &ids = choice.prompt->ids;
  std::vector<TokenRecord> records;
  size_t offset = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const bool scored = i > 0 && i - 1 < event.promptLogprobs.size(); // all, unless aborted
    const int32_t previous = i == 0 ? -1 : ids[i - 1];
    TokenRecord record{
        ids[i], 0.0f, {}, offset, previous, scored, tokenText(tokenizer(), previous, ids[i])};
    if (scored) {
      const sampling::SampledLogprobs &lp = event.promptLogprobs[i - 1];
      record.logprob = lp.chosen.logprob;
      for (const sampling::TokenLogprob &t : lp.top)
        record.top.emplace_back(t.id, t.logprob);
    }
    offset += record.text.size();
    records.push_back(std::move(record));
  }
  choice.tokens.insert(choice.tokens.begin(), records.begin(), records.end());
  choice.echoedTokensText = offset;
  if (exchange->request.stream)
    choice.pending = choice.prompt->text + choice.pending;
}

bool Handler::absorbEvents(std::chrono::milliseconds wait) {
  std::vector<std::pair<size_t, std::pair<serving::TokenEvent, Clock::time_point>>> events;
  {
    std::unique_lock<std::mutex> lock(exchange->mutex);
    auto anyEvent = [&] {
      for (const Choice &choice : exchange->choices)
        if (!choice.inbox.empty())
          return true;
      return false;
    };
    exchange->wake.wait_for(lock, wait, anyEvent);
    for (Choice &choice : exchange->choices) {
      for (auto &event : choice.inbox)
        events.emplace_back(choice.index, std::move(event));
      choice.inbox.clear();
    }
  }
  for (auto &[index, event] : events)
    absorb(exchange->choices[index], event.first, event.second);
  return !events.empty();
}

Json Handler::usage() const {
  int64_t promptTokens = 0, completionTokens = 0, cached = 0;
  for (const PreparedPrompt &prompt : exchange->prompts)
    promptTokens += static_cast<int64_t>(prompt.ids.size());
  for (const Choice &choice : exchange->choices) {
    completionTokens += choice.completionTokens;
    cached += choice.cachedTokens;
  }
  Json u = {{"prompt_tokens", promptTokens},
            {"completion_tokens", completionTokens},
            {"total_tokens", promptTokens + completionTokens}};
  u["prompt_tokens_details"] = {{"cached_tokens", cached}};
  return u;
}

// OpenAI's completions logprobs: parallel lists over the tokens [from, to).
Json Handler::completionLogprobs(const Choice &choice, size_t from, size_t to) const {
  Json tokens = Json::array(), logprobs = Json::array(), tops = Json::array(),
       offsets = Json::array();
  for (size_t i = from; i < to; ++i) {
    const TokenRecord &record = choice.tokens[i];
    tokens.push_back(record.text);
    if (!record.hasLogprob) {
      logprobs.push_back(nullptr);
      tops.push_back(nullptr);
    } else {
      logprobs.push_back(record.logprob);
      // Ids of one text (pieces of a UTF-8 character, each shown as U+FFFD)
      // share its key: the most likely keeps it.
      Json top = Json::object();
      for (const auto &[id, logprob] : record.top) {
        const std::string text = tokenText(tokenizer(), record.previous, id);
        if (!top.contains(text))
          top[text] = logprob;
      }
      tops.push_back(std::move(top));
    }
    offsets.push_back(record.textOffset);
  }
  return {{"tokens", tokens}, {"token_logprobs", logprobs}, {"top_logprobs", tops},
          {"text_offset", offsets}};
}

Json bytesOf(const std::string &text) {
  Json bytes = Json::array();
  for (unsigned char c : text)
    bytes.push_back(static_cast<int>(c));
  return bytes;
}

// OpenAI's chat logprobs: {"content": [{token, logprob, bytes, top_logprobs}]}.
Json Handler::chatLogprobs(const Choice &choice, size_t from, size_t to) const {
  Json content = Json::array();
  for (size_t i = from; i < to; ++i) {
    const TokenRecord &record = choice.tokens[i];
    const int32_t previous = record.previous;
    const std::string &text = record.text;
    Json top = Json::array();
    for (const auto &[id, logprob] : record.top) {
      std::string alternative = tokenText(tokenizer(), previous, id);
      top.push_back({{"token", alternative}, {"logprob", logprob}, {"bytes", bytesOf(alternative)}});
    }
    content.push_back(
        {{"token", text}, {"logprob", record.logprob}, {"bytes", bytesOf(text)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

Json Handler::fullResponse() const {
  const bool chat = exchange->request.endpoint == Endpoint::ChatCompletions;
  Json choices = Json::array();
  for (const Choice &choice : exchange->choices) {
    Json c = {{"index", choice.index}, {"finish_reason", choice.finishReason}};
    Json logprobs = nullptr;
    if (exchange->request.logprobs)
      logprobs = chat ? chatLogprobs(choice, 0, choice.tokens.size())
                      : completionLogprobs(choice, 0, choice.tokens.size());
    if (chat) {
      c["message"] = {{"role", "assistant"}, {"content", choice.text->text()}};
    } else {
      c["text"] = (exchange->request.echo ? choice.prompt->text : std::string()) +
                  choice.text->text();
    }
    c["logprobs"] = logprobs;
    choices.push_back(std::move(c));
  }
  return {{"id", exchange->id},
          {"object", chat ? "chat.completion" : "text_completion"},
          {"created", exchange->created},
          {"model", exchange->model},
          {"choices", choices},
          {"usage", usage()}};
}

std::string Handler::chunk(Json choices, bool withUsageNull) const {
  const bool chat = exchange->request.endpoint == Endpoint::ChatCompletions;
  Json j = {{"id", exchange->id},
            {"object", chat ? "chat.completion.chunk" : "text_completion"},
            {"created", exchange->created},
            {"model", exchange->model},
            {"choices", std::move(choices)}};
  if (withUsageNull)
    j["usage"] = nullptr;
  return "data: " + dumpJson(j) + "\n\n";
}

// The SSE events for what the choices gained since the last call: one chunk
// per choice with news, then (final) the usage chunk and [DONE].
std::vector<std::string> Handler::streamChunks(bool final) {
  const GenerationRequest &request = exchange->request;
  const bool chat = request.endpoint == Endpoint::ChatCompletions;
  const bool usageNull = request.includeUsage;
  std::vector<std::string> out;
  for (Choice &choice : exchange->choices) {
    bool finishing = choice.done && !choice.finishReason.empty() && choice.tokensSent != SIZE_MAX;
    bool news = !choice.pending.empty() || choice.tokensSent < choice.tokens.size() || finishing ||
                (chat && !choice.roleSent);
    if (!news)
      continue;
    Json c = {{"index", choice.index}};
    Json logprobs = nullptr;
    if (request.logprobs && choice.tokensSent < choice.tokens.size())
      logprobs = chat ? chatLogprobs(choice, choice.tokensSent, choice.tokens.size())
                      : completionLogprobs(choice, choice.tokensSent, choice.tokens.size());
    else if (request.logprobs && !chat)
      logprobs = completionLogprobs(choice, 0, 0);
    choice.tokensSent = choice.tokens.size();
    if (chat) {
      Json delta = Json::object();
      if (!choice.roleSent) {
        delta["role"] = "assistant";
        choice.roleSent = true;
      }
      if (!choice.pending.empty() || delta.contains("role"))
        delta["content"] = choice.pending;
      c["delta"] = delta;
    } else {
      c["text"] = choice.pending;
    }
    choice.pending.clear();
    c["logprobs"] = logprobs;
    c["finish_reason"] = finishing ? Json(choice.finishReason) : Json(nullptr);
    if (finishing)
      choice.tokensSent = SIZE_MAX; // the finish chunk went out: nothing more for this choice
    out.push_back(chunk(Json::array({c}), usageNull));
  }
  if (final) {
    if (request.includeUsage) {
      Json j = {{"id", exchange->id},
                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", exchange->created},
                {"model", exchange->model},
                {"choices", Json::array()},
                {"usage", usage()}};
      out.push_back("data: " + dumpJson(j) + "\n\n");
    }
    out.push_back("data: [DONE]\n\n");
  }
  return out;
}

// Streams until every choice is done or the client goes away.
void streamResponse(const GenerationContext &context, std::shared_ptr<Handler> handler,
                    httplib::Response &response) {
  context.inFlight++;
  if (handler->exchange->request.echo && !handler->echoesLogprobs())
    for (Choice &choice : handler->exchange->choices)
      choice.pending = choice.prompt->text; // else with the prompt's logprobs (recordPrompt)
  auto provider = [handler](size_t, httplib::DataSink &sink) -> bool {
    auto writeAll = [&](const std::vector<std::string> &chunks) {
      for (const std::string &c : chunks)
        if (!sink.write(c.data(), c.size()))
          return false;
      return true;
    };
    for (;;) {
      bool news = handler->absorbEvents(std::chrono::milliseconds(100));
      // A choice's stream stops at its finish chunk; the others go on.
      bool done = handler->allDone();
      // Choices that finished get their finish chunk (tokensSent == SIZE_MAX after).
      std::vector<std::string> chunks = handler->streamChunks(done);
      if (!writeAll(chunks)) {
        handler->cancelUnfinished(); // the client went away
        return false;
      }
      if (done) {
        sink.done();
        return true;
      }
      // Tokens came but their text is held back (an incomplete character,
      // the start of a stop string): an SSE comment line, which clients
      // ignore, still tests the connection, so a client that left is
      // noticed within a token or two whatever the text does.
      if (news && chunks.empty() && !writeAll({":\n\n"})) {
        handler->cancelUnfinished();
        return false;
      }
      if (chunks.empty() && !sink.is_writable()) {
        handler->cancelUnfinished();
        return false;
      }
    }
  };
  auto releaser = [handler, &inFlight = context.inFlight](bool) {
    handler->cancelUnfinished();
    inFlight--;
  };
  response.set_header("Cache-Control", "no-cache");
  response.set_chunked_content_provider("text/event-stream", provider, releaser);
}

} // namespace

// The plan's generation defaults (generation_config.json) for the sampling
// fields the request left out, as vLLM applies them; a field the request
// sets always wins.
void applyGenerationDefaults(const fb::GenerationDefaults *defaults, const GivenSampling &given,
                             sampling::SamplingParams &s) {
  if (defaults == nullptr)
    return;
  if (!given.temperature && defaults->temperature())
    s.temperature = *defaults->temperature();
  if (!given.topP && defaults->top_p())
    s.topP = *defaults->top_p();
  if (!given.topK && defaults->top_k())
    s.topK = *defaults->top_k();
  if (!given.minP && defaults->min_p())
    s.minP = *defaults->min_p();
  if (!given.repetitionPenalty && defaults->repetition_penalty())
    s.repetitionPenalty = *defaults->repetition_penalty();
}

void setError(httplib::Response &response, const ApiError &error) {
  response.status = error.status;
  response.set_content(error.body(), "application/json");
}

void handleGeneration(const GenerationContext &context, Endpoint endpoint,
                      const httplib::Request &request, httplib::Response &response) {
  auto exchange = std::make_shared<Exchange>();
  exchange->arrival = Clock::now();
  auto handler = std::make_shared<Handler>(Handler{context, exchange});
  auto fail = [&](const ApiError &error) {
    context.metrics.rejected++;
    setError(response, error);
  };
  if (auto error = parseGenerationRequest(request.body, endpoint, context.options.limits,
                                          exchange->request))
    return fail(*error);
  GenerationRequest &parsed = exchange->request;
  if (!parsed.model.empty() && parsed.model != context.options.modelName)
    return fail(notFound("model", "the model '" + parsed.model +
                                      "' does not exist; this server serves '" +
                                      context.options.modelName + "' (see GET /v1/models)"));
  exchange->id = responseId(endpoint);
  exchange->created = unixSeconds();
  exchange->model = context.options.modelName;
  if (auto error = handler->tokenize())
    return fail(*error);
  if (auto error = handler->submit())
    return fail(*error);
  if (parsed.stream)
    return streamResponse(context, handler, response);
  context.inFlight++;
  // A client that hangs up is noticed within one wait (100 ms) and its
  // requests are aborted at the loop's next iteration.
  const int socket = findConnectionSocket(request.remote_addr, request.remote_port,
                                          request.local_port);
  bool clientGone = false;
  while (!handler->allDone()) {
    handler->absorbEvents(std::chrono::milliseconds(100));
    if (!clientGone && socket >= 0 && peerHasClosed(socket)) {
      clientGone = true;
      handler->cancelUnfinished();
    }
  }
  context.inFlight--;
  if (clientGone) // nobody reads this; the abort is counted in the metrics
    return setError(response, badRequest("", "the client closed the connection"));
  for (const Choice &choice : exchange->choices)
    if (choice.finishReason == "error")
      return fail(internalError("generation failed: " + choice.error));
  response.set_content(dumpJson(handler->fullResponse()), "application/json");
}

} // namespace llmc::server
