#include "tokenizer/regex.h"

#include "tokenizer/utf8.h"

#include <pcre2.h>

namespace llmc::tok {

struct Regex::Code {
  pcre2_code *code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {

// Per-thread match state: encode() is const and may run on many threads.
// The JIT stack grows up to 8 MiB so that long runs (e.g. 100 KB of spaces
// matched by \s+) never fail with PCRE2_ERROR_JIT_STACKLIMIT.
struct MatchState {
  pcre2_match_data *data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context *context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack *jitStack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);

  MatchState() { pcre2_jit_stack_assign(context, nullptr, jitStack); }
  ~MatchState() {
    pcre2_jit_stack_free(jitStack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

MatchState &matchState() {
  thread_local MatchState state;
  return state;
}

} // namespace

Expected<Regex> Regex::compile(const std::string &pattern) {
  int errorCode = 0;
  PCRE2_SIZE errorOffset = 0;
  pcre2_code *code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &errorCode, &errorOffset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(errorCode, message, sizeof(message));
    return Status::error("invalid regular expression at offset " + std::to_string(errorOffset) +
                         ": " + reinterpret_cast<const char *>(message));
  }
  // Without JIT (e.g. an unsupported CPU) pcre2_match falls back to the interpreter.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  Regex regex;
  auto owned = std::make_shared<Code>();
  owned->code = code;
  regex.code_ = std::move(owned);
  return regex;
}

void Regex::findAll(std::string_view text, std::vector<Span> &matches) const {
  MatchState &state = matchState();
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    int rc = pcre2_match(code_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, state.data,
                         state.context);
    if (rc < 0)
      return; // PCRE2_ERROR_NOMATCH (limits are not reachable with the stack above)
    const PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(state.data);
    Span match{ovector[0], ovector[1]};
    matches.push_back(match);
    if (match.end > match.begin)
      start = match.end;
    else if (match.end < text.size())
      start = match.end + utf8::charLength(static_cast<uint8_t>(text[match.end]));
    else
      break;
  }
}

Expected<Pattern> Pattern::fromJson(const Json &value, const JsonPath &at) {
  if (!value.is_object() || value.size() != 1)
    return at.error("expected {\"String\": ...} or {\"Regex\": ...}, got " + value.dump());
  Pattern pattern;
  if (const Json *literal = member(value, "String")) {
    if (!literal->is_string())
      return at.child("String").wrongType("a string", *literal);
    pattern.literal_ = literal->get<std::string>();
    return pattern;
  }
  const Json *regex = member(value, "Regex");
  if (regex == nullptr)
    return at.error("expected {\"String\": ...} or {\"Regex\": ...}, got " + value.dump());
  if (!regex->is_string())
    return at.child("Regex").wrongType("a string", *regex);
  auto compiled = Regex::compile(regex->get<std::string>());
  if (!compiled)
    return at.child("Regex").error(compiled.message());
  pattern.regex_ = std::make_shared<const Regex>(std::move(compiled).value());
  return pattern;
}

Pattern Pattern::literal(std::string text) {
  Pattern pattern;
  pattern.literal_ = std::move(text);
  return pattern;
}

void Pattern::findAll(std::string_view text, std::vector<Span> &matches) const {
  if (regex_) {
    regex_->findAll(text, matches);
    return;
  }
  if (literal_.empty())
    return; // an empty literal matches nothing (as in Hugging Face)
  for (size_t pos = text.find(literal_); pos != std::string_view::npos;
       pos = text.find(literal_, pos + literal_.size()))
    matches.push_back({pos, pos + literal_.size()});
}

std::string Pattern::replaceAll(std::string_view text, std::string_view content) const {
  thread_local std::vector<Span> matches;
  matches.clear();
  findAll(text, matches);
  std::string out;
  out.reserve(text.size());
  size_t last = 0;
  for (const Span &m : matches) {
    out.append(text.substr(last, m.begin - last));
    out.append(content);
    last = m.end;
  }
  out.append(text.substr(last));
  return out;
}

} // namespace llmc::tok
