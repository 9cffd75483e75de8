#include "tokenizer/regex.h"

#include "tokenizer/utf8.h"

#include <pcre2.h>

namespace llmc::tok {

struct Regex::Code {
  pcre2_code *code = nullptr;
  std::string pattern;
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
  owned->pattern = pattern;
  regex.code_ = std::move(owned);
  return regex;
}

const std::string &Regex::pattern() const { return code_->pattern; }

namespace {

// "regular expression '...' failed on a 300-byte text: <PCRE2's reason>".
Status matchFailure(const std::string &pattern, size_t textBytes, int rc) {
  PCRE2_UCHAR message[256];
  pcre2_get_error_message(rc, message, sizeof(message));
  std::string shown = pattern.size() > 200 ? pattern.substr(0, 200) + "..." : pattern;
  return Status::error("regular expression '" + shown + "' failed on a " +
                       std::to_string(textBytes) + "-byte text: " +
                       reinterpret_cast<const char *>(message) +
                       " (catastrophic backtracking: simplify the pattern)");
}

} // namespace

Status Regex::findAll(std::string_view text, std::vector<Span> &matches) const {
  MatchState &state = matchState();
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    int rc = pcre2_match(code_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, state.data,
                         state.context);
    if (rc == PCRE2_ERROR_NOMATCH)
      return Status::ok();
    if (rc < 0) // the match, depth or heap limit: the answer is unknown, not "no match"
      return matchFailure(code_->pattern, text.size(), rc);
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
  return Status::ok();
}

Expected<Pattern> Pattern::fromJson(const Json &value, const JsonPath &at) {
  if (!value.is_object() || value.size() != 1)
    return at.error("expected {\"String\": ...} or {\"Regex\": ...}, got " + value.dump());
  Pattern pattern;
  pattern.where_ = *at.source + ": field '" + at.path + "'";
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

Pattern Pattern::literal(std::string text, std::string where) {
  Pattern pattern;
  pattern.literal_ = std::move(text);
  pattern.where_ = std::move(where);
  return pattern;
}

Status Pattern::findAll(std::string_view text, std::vector<Span> &matches) const {
  if (regex_) {
    Status status = regex_->findAll(text, matches);
    return status.isOk() || where_.empty() ? status : status.withContext(where_);
  }
  if (literal_.empty())
    return Status::ok(); // an empty literal matches nothing (as in Hugging Face)
  for (size_t pos = text.find(literal_); pos != std::string_view::npos;
       pos = text.find(literal_, pos + literal_.size()))
    matches.push_back({pos, pos + literal_.size()});
  return Status::ok();
}

Status Pattern::replaceInPlace(std::string &text, std::string_view content,
                               size_t maxOutputBytes) const {
  if (!regex_ && (literal_.empty() || text.find(literal_) == std::string::npos))
    return Status::ok(); // the common case in decoders: nothing to replace
  LLMC_ASSIGN_OR_RETURN(std::string replaced, replaceAll(text, content, maxOutputBytes));
  text = std::move(replaced);
  return Status::ok();
}

Expected<std::string> Pattern::replaceAll(std::string_view text, std::string_view content,
                                          size_t maxOutputBytes) const {
  thread_local std::vector<Span> matches;
  matches.clear();
  LLMC_RETURN_IF_ERROR(findAll(text, matches));
  // The size first, so that a hostile pattern fails before allocating.
  size_t outputBytes = text.size();
  for (const Span &m : matches)
    outputBytes = outputBytes - (m.end - m.begin) + content.size();
  if (outputBytes > maxOutputBytes)
    return Status::error((where_.empty() ? std::string("a replacement") : where_) +
                         ": replacing its " + std::to_string(matches.size()) +
                         " matches would turn " + std::to_string(text.size()) +
                         " bytes of text into " + std::to_string(outputBytes) +
                         ", more than the bound of " + std::to_string(maxOutputBytes) +
                         " (a pattern that matches the empty string, or a long content?)");
  std::string out;
  out.reserve(outputBytes);
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
