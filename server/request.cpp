#include "server/request.h"

#include "support/json.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace llmc::server {
namespace {

using Json = nlohmann::json;

std::string typeName(const Json &value) { return jsonTypeName(value); }

// Reads the fields of the request object; the first error sticks.
class Fields {
public:
  explicit Fields(const Json &object) : object_(object) {}

  const std::optional<ApiError> &error() const { return error_; }
  bool failed() const { return error_.has_value(); }
  void fail(const std::string &param, const std::string &message) {
    if (!error_)
      error_ = badRequest(param, param + ": " + message);
  }

  // The field, or null when it is absent or JSON null.
  const Json *find(const char *key) const {
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null())
      return nullptr;
    return &*it;
  }

  void readBool(const char *key, bool &out) {
    const Json *value = find(key);
    if (!value || failed())
      return;
    if (!value->is_boolean())
      return fail(key, "expected a boolean, got " + typeName(*value));
    out = value->get<bool>();
  }

  void readString(const char *key, std::string &out) {
    const Json *value = find(key);
    if (!value || failed())
      return;
    if (!value->is_string())
      return fail(key, "expected a string, got " + typeName(*value));
    out = value->get<std::string>();
  }

  // An integer in [lo, hi]; a float with no fraction counts (16.0), as
  // OpenAI's Python validators accept it.
  bool readInt(const char *key, int64_t lo, int64_t hi, int64_t &out) {
    const Json *value = find(key);
    if (!value || failed())
      return false;
    std::optional<int64_t> parsed = asInt(*value);
    if (!parsed)
      return fail(key, "expected an integer, got " + describe(*value)), false;
    if (*parsed < lo || *parsed > hi)
      return fail(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                           "], got " + std::to_string(*parsed)),
             false;
    out = *parsed;
    return true;
  }

  // Whether the field was given (and valid).
  bool readFloat(const char *key, double lo, double hi, bool loOpen, float &out) {
    const Json *value = find(key);
    if (!value || failed())
      return false;
    if (!value->is_number())
      return fail(key, "expected a number, got " + typeName(*value)), false;
    double v = value->get<double>();
    bool belowRange = loOpen ? !(v > lo) : !(v >= lo);
    if (!std::isfinite(v) || belowRange || !(v <= hi))
      return fail(key, std::string("must be in ") + (loOpen ? "(" : "[") + formatNumber(lo) +
                           ", " + formatNumber(hi) + "], got " + formatNumber(v)),
             false;
    out = static_cast<float>(v);
    return true;
  }

  static std::optional<int64_t> asInt(const Json &value) {
    if (value.is_number_integer()) {
      if (value.is_number_unsigned() &&
          value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return std::nullopt;
      return value.get<int64_t>();
    }
    if (value.is_number_float()) {
      double v = value.get<double>();
      if (std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 9.0e15)
        return static_cast<int64_t>(v);
    }
    return std::nullopt;
  }

  static std::string describe(const Json &value) {
    if (value.is_number())
      return "the number " + value.dump();
    return typeName(value);
  }

  static std::string formatNumber(double v) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%g", v);
    return buffer;
  }

private:
  const Json &object_;
  std::optional<ApiError> error_;
};

constexpr int64_t kMaxTokenId = std::numeric_limits<int32_t>::max();

// A list of token ids: every element an integer in [0, 2^31).
bool readTokenList(Fields &fields, const char *param, const Json &list,
                   std::vector<int64_t> &out) {
  out.reserve(list.size());
  for (const Json &element : list) {
    std::optional<int64_t> id = element.is_number_integer() ? Fields::asInt(element) : std::nullopt;
    if (!id || *id < 0 || *id > kMaxTokenId) {
      fields.fail(param, "token ids must be integers in [0, 2147483647], got " +
                             Fields::describe(element));
      return false;
    }
    out.push_back(*id);
  }
  return true;
}

// prompt: "text" | ["text", ...] | [id, ...] | [[id, ...], ...].
void readPrompt(Fields &fields, const RequestLimits &limits, GenerationRequest &out) {
  const Json *prompt = fields.find("prompt");
  if (!prompt)
    return fields.fail("prompt", "is required");
  auto addText = [&](const Json &text) {
    if (text.get_ref<const std::string &>().empty())
      return fields.fail("prompt", "is empty; send at least one character or token id");
    out.prompts.push_back({false, text.get<std::string>(), {}});
  };
  if (prompt->is_string())
    return addText(*prompt);
  if (!prompt->is_array())
    return fields.fail("prompt", "expected a string, a list of strings, a list of token ids or "
                                 "a list of token-id lists, got " +
                                     typeName(*prompt));
  if (prompt->empty())
    return fields.fail("prompt", "is an empty list; send at least one prompt");
  const Json &first = prompt->front();
  if (first.is_number()) { // one prompt of token ids
    PromptInput input{true, {}, {}};
    if (readTokenList(fields, "prompt", *prompt, input.tokens))
      out.prompts.push_back(std::move(input));
    return;
  }
  if (static_cast<int64_t>(prompt->size()) > limits.maxPrompts)
    return fields.fail("prompt", "holds " + std::to_string(prompt->size()) +
                                     " prompts; at most " + std::to_string(limits.maxPrompts) +
                                     " per request");
  for (const Json &element : *prompt) {
    if (fields.failed())
      return;
    if (element.is_string() && first.is_string()) {
      addText(element);
    } else if (element.is_array() && first.is_array()) {
      if (element.empty())
        return fields.fail("prompt", "holds an empty token-id list");
      PromptInput input{true, {}, {}};
      if (readTokenList(fields, "prompt", element, input.tokens))
        out.prompts.push_back(std::move(input));
    } else {
      return fields.fail("prompt", "a list of prompts must hold only strings or only token-id "
                                   "lists, got " +
                                       typeName(element));
    }
  }
}

// The text of a message's content: a string, or a list of {"type": "text",
// "text": ...} parts (joined), or null (e.g. an assistant turn with tool calls).
bool readContent(Fields &fields, const std::string &param, const Json &content,
                 std::string &text) {
  if (content.is_null())
    return true;
  if (content.is_string()) {
    text = content.get<std::string>();
    return true;
  }
  if (!content.is_array()) {
    fields.fail(param, "expected a string or a list of content parts, got " + typeName(content));
    return false;
  }
  for (const Json &part : content) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      fields.fail(param, "each content part must be an object with a string 'type'");
      return false;
    }
    const std::string &type = part["type"].get_ref<const std::string &>();
    if (type != "text") {
      fields.fail(param, "content parts of type '" + type +
                             "' are not supported by this text-only model; send 'text' parts");
      return false;
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      fields.fail(param, "a 'text' content part needs a string 'text'");
      return false;
    }
    text += part["text"].get<std::string>();
  }
  return true;
}

// messages: [{"role": "system"|"user"|"assistant"|"tool"|"developer", "content": ...}, ...].
// Content parts are flattened to one string so that templates see plain text.
void readMessages(Fields &fields, const RequestLimits &limits, GenerationRequest &out) {
  const Json *messages = fields.find("messages");
  if (!messages)
    return fields.fail("messages", "is required");
  if (!messages->is_array())
    return fields.fail("messages", "expected a list of messages, got " + typeName(*messages));
  if (messages->empty())
    return fields.fail("messages", "is empty; send at least one message");
  if (static_cast<int64_t>(messages->size()) > limits.maxMessages)
    return fields.fail("messages", "holds " + std::to_string(messages->size()) +
                                       " messages; at most " +
                                       std::to_string(limits.maxMessages));
  out.messages = Json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json &message = (*messages)[i];
    std::string param = "messages[" + std::to_string(i) + "]";
    if (!message.is_object())
      return fields.fail(param, "expected an object, got " + typeName(message));
    auto role = message.find("role");
    if (role == message.end() || !role->is_string())
      return fields.fail(param + ".role", "is required and must be a string");
    const std::string &roleName = role->get_ref<const std::string &>();
    if (roleName != "system" && roleName != "user" && roleName != "assistant" &&
        roleName != "tool" && roleName != "developer")
      return fields.fail(param + ".role", "must be one of system, developer, user, assistant, "
                                          "tool; got '" +
                                              roleName + "'");
    std::string text;
    auto content = message.find("content");
    if (content != message.end() && !readContent(fields, param + ".content", *content, text))
      return;
    Json normalized = message;
    normalized["content"] = text;
    out.messages.push_back(std::move(normalized));
  }
}

// stop: "text" | ["text", ...].
void readStop(Fields &fields, const RequestLimits &limits, GenerationRequest &out) {
  const Json *stop = fields.find("stop");
  if (!stop)
    return;
  auto add = [&](const Json &value) {
    if (!value.is_string())
      return fields.fail("stop", "expected a string or a list of strings, got a list holding " +
                                     typeName(value));
    const std::string &text = value.get_ref<const std::string &>();
    if (text.empty())
      return fields.fail("stop", "holds an empty string; every stop string needs a character");
    if (static_cast<int64_t>(text.size()) > limits.maxStopLength)
      return fields.fail("stop", "a stop string is " + std::to_string(text.size()) +
                                     " bytes; at most " + std::to_string(limits.maxStopLength));
    out.stop.push_back(text);
  };
  if (stop->is_string())
    return add(*stop);
  if (!stop->is_array())
    return fields.fail("stop", "expected a string or a list of strings, got " + typeName(*stop));
  if (static_cast<int64_t>(stop->size()) > limits.maxStop)
    return fields.fail("stop", "holds " + std::to_string(stop->size()) + " strings; at most " +
                                   std::to_string(limits.maxStop));
  for (const Json &value : *stop)
    if (!fields.failed())
      add(value);
}

void readStreamOptions(Fields &fields, GenerationRequest &out) {
  const Json *options = fields.find("stream_options");
  if (!options)
    return;
  if (!options->is_object())
    return fields.fail("stream_options", "expected an object, got " + typeName(*options));
  if (!out.stream)
    return fields.fail("stream_options", "is only allowed with \"stream\": true");
  Fields inner(*options);
  inner.readBool("include_usage", out.includeUsage);
  if (inner.failed())
    fields.fail("stream_options.include_usage", "expected a boolean");
}

void readLogprobs(Fields &fields, const RequestLimits &limits, GenerationRequest &out) {
  if (out.endpoint == Endpoint::Completions) {
    if (fields.readInt("logprobs", 0, limits.maxLogprobs, out.topLogprobs))
      out.logprobs = true;
    return;
  }
  fields.readBool("logprobs", out.logprobs);
  if (fields.readInt("top_logprobs", 0, limits.maxLogprobs, out.topLogprobs) && !out.logprobs)
    fields.fail("top_logprobs", "needs \"logprobs\": true");
}

void readSampling(Fields &fields, GenerationRequest &out) {
  GivenSampling &given = out.given;
  given.temperature = fields.readFloat("temperature", 0.0, 2.0, false, out.temperature);
  given.topP = fields.readFloat("top_p", 0.0, 1.0, true, out.topP);
  given.topK = fields.readInt("top_k", -1, std::numeric_limits<int32_t>::max(), out.topK);
  if (out.topK == -1)
    out.topK = 0;
  given.minP = fields.readFloat("min_p", 0.0, 1.0, false, out.minP);
  given.repetitionPenalty =
      fields.readFloat("repetition_penalty", 0.0, 2.0, true, out.repetitionPenalty);
  fields.readFloat("presence_penalty", -2.0, 2.0, false, out.presencePenalty);
  fields.readFloat("frequency_penalty", -2.0, 2.0, false, out.frequencyPenalty);
  if (const Json *seed = fields.find("seed"); seed && !fields.failed()) {
    std::optional<int64_t> value = Fields::asInt(*seed);
    if (seed->is_number_unsigned())
      out.seed = seed->get<uint64_t>();
    else if (value)
      out.seed = static_cast<uint64_t>(*value); // a negative seed is its two's complement
    else
      fields.fail("seed", "expected an integer, got " + Fields::describe(*seed));
  }
}

void readLengths(Fields &fields, const RequestLimits &limits, GenerationRequest &out) {
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  int64_t maxTokens = 0;
  const char *lengthKey = "max_tokens";
  if (out.endpoint == Endpoint::ChatCompletions && fields.find("max_completion_tokens"))
    lengthKey = "max_completion_tokens";
  if (fields.readInt(lengthKey, 1, kMaxInt, maxTokens))
    out.maxTokens = maxTokens;
  fields.readInt("min_tokens", 0, kMaxInt, out.minTokens);
  if (out.maxTokens && out.minTokens > *out.maxTokens)
    fields.fail("min_tokens", "is " + std::to_string(out.minTokens) + ", more than " +
                                  lengthKey + " (" + std::to_string(*out.maxTokens) + ")");
  fields.readInt("n", 1, limits.maxN, out.n);
}

void readStopTokenIds(Fields &fields, GenerationRequest &out) {
  const Json *ids = fields.find("stop_token_ids");
  if (!ids || fields.failed())
    return;
  if (!ids->is_array())
    return fields.fail("stop_token_ids", "expected a list of token ids, got " + typeName(*ids));
  if (ids->size() > 64)
    fields.fail("stop_token_ids", "holds " + std::to_string(ids->size()) + " ids; at most 64");
  else
    readTokenList(fields, "stop_token_ids", *ids, out.stopTokenIds);
}

} // namespace

std::optional<ApiError> parseGenerationRequest(std::string_view body, Endpoint endpoint,
                                               const RequestLimits &limits,
                                               GenerationRequest &out) {
  out = GenerationRequest();
  out.endpoint = endpoint;
  JsonParseOptions options;
  options.maxDepth = 32;
  Expected<Json> parsed = parseJson(body, "request body", options);
  if (!parsed)
    return badRequest("", parsed.message() + " (send one JSON object)");
  const Json &object = *parsed;
  if (!object.is_object())
    return badRequest("", "request body: expected a JSON object, got " + typeName(object));
  Fields fields(object);
  fields.readString("model", out.model);
  if (endpoint == Endpoint::Completions)
    readPrompt(fields, limits, out);
  else
    readMessages(fields, limits, out);
  readLengths(fields, limits, out);
  fields.readBool("stream", out.stream);
  readStreamOptions(fields, out);
  if (endpoint == Endpoint::Completions)
    fields.readBool("echo", out.echo);
  readSampling(fields, out);
  readStop(fields, limits, out);
  readStopTokenIds(fields, out);
  fields.readBool("ignore_eos", out.ignoreEos);
  fields.readBool("skip_special_tokens", out.skipSpecialTokens);
  readLogprobs(fields, limits, out);
  if (endpoint == Endpoint::ChatCompletions) {
    fields.readBool("add_generation_prompt", out.addGenerationPrompt);
    if (const Json *kwargs = fields.find("chat_template_kwargs"); kwargs && !fields.failed()) {
      if (!kwargs->is_object())
        fields.fail("chat_template_kwargs", "expected an object, got " + typeName(*kwargs));
      else
        out.chatTemplateKwargs = *kwargs;
    }
  }
  if (fields.find("best_of") && !fields.failed()) {
    int64_t bestOf = 1;
    if (fields.readInt("best_of", 1, limits.maxN, bestOf) && bestOf != out.n)
      fields.fail("best_of", "is not supported (only best_of == n)");
  }
  if (fields.find("suffix") && !fields.failed())
    fields.fail("suffix", "is not supported by this server");
  if (fields.find("tools") && !fields.failed() && endpoint == Endpoint::ChatCompletions &&
      !(fields.find("tools")->is_array() && fields.find("tools")->empty()))
    fields.fail("tools", "tool calling is not supported by this server");
  if (fields.failed())
    return fields.error();
  return std::nullopt;
}

} // namespace llmc::server
