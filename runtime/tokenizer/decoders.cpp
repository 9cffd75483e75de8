#include "tokenizer/decoders.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/limits.h"
#include "tokenizer/utf8.h"

namespace llmc::tok {
namespace {

// The byte of a "<0xXX>" token (hex digits in either case), or -1.
int byteOfToken(const std::string &token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>')
    return -1;
  auto hex = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
  };
  int hi = hex(token[3]), lo = hex(token[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// Appends a run of <0xXX> bytes: its text if it is valid UTF-8, else one
// U+FFFD per byte (Hugging Face's ByteFallback decoder).
void flushBytes(std::string &bytes, std::vector<std::string> &out) {
  if (bytes.empty())
    return;
  if (utf8::isValid(bytes))
    out.push_back(bytes);
  else
    for (size_t i = 0; i < bytes.size(); ++i)
      out.emplace_back(utf8::kReplacementChar);
  bytes.clear();
}

void byteFallback(std::vector<std::string> &tokens) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string bytes;
  for (std::string &token : tokens) {
    int byte = byteOfToken(token);
    if (byte >= 0) {
      bytes += static_cast<char>(byte);
      continue;
    }
    flushBytes(bytes, out);
    out.push_back(std::move(token));
  }
  flushBytes(bytes, out);
  tokens = std::move(out);
}

// All tokens become one string of raw bytes (tokens with a character
// outside the byte alphabet, such as added tokens, are kept as they are),
// then invalid UTF-8 is repaired.
void byteLevel(std::vector<std::string> &tokens) {
  std::string bytes;
  for (const std::string &token : tokens)
    if (!byte_level::appendUnmapped(token, bytes))
      bytes += token;
  tokens.assign(1, utf8::repair(bytes));
}

void fuse(std::vector<std::string> &tokens) {
  std::string joined;
  for (const std::string &token : tokens)
    joined += token;
  tokens.assign(1, std::move(joined));
}

// Removes up to `start` leading and `stop` trailing copies of `content` (one character).
void strip(std::string &token, const std::string &content, size_t start, size_t stop) {
  size_t begin = 0, end = token.size();
  for (size_t i = 0; i < start && token.compare(begin, content.size(), content) == 0; ++i)
    begin += content.size();
  for (size_t i = 0; i < stop && end >= begin + content.size() &&
                     token.compare(end - content.size(), content.size(), content) == 0;
       ++i)
    end -= content.size();
  token = token.substr(begin, end - begin);
}

void replaceEvery(std::string &text, std::string_view from, std::string_view to) {
  std::string out;
  size_t last = 0;
  for (size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, last)) {
    out.append(text, last, pos - last);
    out.append(to);
    last = pos + from.size();
  }
  out.append(text, last, std::string::npos);
  text = std::move(out);
}

// Hugging Face's WordPiece cleanup, in its order.
void cleanupSpaces(std::string &token) {
  static const std::pair<const char *, const char *> rules[] = {
      {" .", "."},   {" ?", "?"},   {" !", "!"},   {" ,", ","},         {" ' ", "'"},  {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto &[from, to] : rules)
    if (token.find(from) != std::string::npos)
      replaceEvery(token, from, to);
}

void wordPiece(std::vector<std::string> &tokens, const std::string &prefix, bool cleanup) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string &token = tokens[i];
    if (i != 0) {
      if (token.compare(0, prefix.size(), prefix) == 0)
        token.erase(0, prefix.size());
      else
        token.insert(0, " ");
    }
    if (cleanup)
      cleanupSpaces(token);
  }
}

// BPEDecoder: the suffix ends a word; it becomes a space except at the end.
void bpeSuffix(std::vector<std::string> &tokens, const std::string &suffix) {
  for (size_t i = 0; i < tokens.size(); ++i)
    replaceEvery(tokens[i], suffix, i + 1 == tokens.size() ? "" : " ");
}

} // namespace

Expected<Decoder> Decoder::fromJson(const Json &value, const JsonPath &at) {
  Decoder decoder;
  if (!value.is_null()) {
    LLMC_RETURN_IF_ERROR(decoder.parse(value, at));
    decoder.present_ = true;
  }
  return decoder;
}

Status Decoder::parse(const Json &value, const JsonPath &at) {
  if (!value.is_object())
    return at.wrongType("an object", value);
  LLMC_ASSIGN_OR_RETURN(std::string type, getString(value, "type", at));
  if (type == "Sequence") {
    LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "decoders"}));
    LLMC_ASSIGN_OR_RETURN(const Json *list, getArray(value, "decoders", at));
    for (size_t i = 0; i < list->size(); ++i)
      LLMC_RETURN_IF_ERROR(parse((*list)[i], at.child("decoders").at(i)));
    return Status::ok();
  }
  if (type == "ByteLevel") {
    // The options only affect offsets, never the text.
    LLMC_RETURN_IF_ERROR(
        checkKeys(value, at, {"type", "add_prefix_space", "trim_offsets", "use_regex"}));
    steps_.emplace_back(Kind::ByteLevel);
    return Status::ok();
  }
  if (type == "ByteFallback" || type == "Fuse") {
    LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type"}));
    steps_.emplace_back(type == "Fuse" ? Kind::Fuse : Kind::ByteFallback);
    return Status::ok();
  }
  if (type == "Strip")
    return parseStrip(value, at);
  if (type == "Metaspace")
    return parseMetaspace(value, at);
  if (type == "WordPiece")
    return parseWordPiece(value, at);
  if (type == "BPEDecoder") {
    LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "suffix"}));
    Step step(Kind::BpeSuffix);
    LLMC_ASSIGN_OR_RETURN(auto suffix, getOptionalString(value, "suffix", at));
    step.content = suffix ? *suffix : "</w>";
    if (step.content.empty() || step.content.size() > kMaxInsertBytes)
      return at.child("suffix").error("must be 1 to " + std::to_string(kMaxInsertBytes) +
                                      " bytes long");
    steps_.push_back(std::move(step));
    return Status::ok();
  }
  if (type == "Replace") {
    LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "pattern", "content"}));
    Step step(Kind::Replace);
    LLMC_ASSIGN_OR_RETURN(step.content, getString(value, "content", at));
    if (step.content.size() > kMaxInsertBytes)
      return at.child("content").error("is " + std::to_string(step.content.size()) +
                                       " bytes long; llmc accepts at most " +
                                       std::to_string(kMaxInsertBytes));
    const Json *pattern = member(value, "pattern");
    if (pattern == nullptr)
      return at.child("pattern").error("missing (expected {\"String\": ...} or {\"Regex\": ...})");
    LLMC_ASSIGN_OR_RETURN(step.pattern, Pattern::fromJson(*pattern, at.child("pattern")));
    steps_.push_back(std::move(step));
    return Status::ok();
  }
  return at.child("type").error(
      "unsupported decoder type '" + type +
      "' (supported: ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, WordPiece, "
      "BPEDecoder, Sequence)");
}

Status Decoder::parseWordPiece(const Json &value, const JsonPath &at) {
  LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "prefix", "cleanup"}));
  Step step(Kind::WordPiece);
  LLMC_ASSIGN_OR_RETURN(auto prefix, getOptionalString(value, "prefix", at));
  step.content = prefix ? *prefix : "##";
  if (step.content.size() > kMaxInsertBytes)
    return at.child("prefix").error("is longer than " + std::to_string(kMaxInsertBytes) +
                                    " bytes");
  LLMC_ASSIGN_OR_RETURN(step.cleanup, getBool(value, "cleanup", true, at));
  steps_.push_back(std::move(step));
  return Status::ok();
}

Status Decoder::parseStrip(const Json &value, const JsonPath &at) {
  LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "content", "start", "stop"}));
  Step step(Kind::Strip);
  LLMC_ASSIGN_OR_RETURN(step.content, getString(value, "content", at));
  size_t length = 0;
  char32_t cp;
  if (step.content.empty() || !utf8::decode(step.content, length, cp) ||
      length != step.content.size())
    return at.child("content").error("must be one character, got '" + step.content + "'");
  LLMC_ASSIGN_OR_RETURN(int64_t start, getInt(value, "start", int64_t(0), 0, 1 << 20, at));
  LLMC_ASSIGN_OR_RETURN(int64_t stop, getInt(value, "stop", int64_t(0), 0, 1 << 20, at));
  step.start = static_cast<size_t>(start);
  step.stop = static_cast<size_t>(stop);
  steps_.push_back(std::move(step));
  return Status::ok();
}

Status Decoder::parseMetaspace(const Json &value, const JsonPath &at) {
  LLMC_RETURN_IF_ERROR(
      checkKeys(value, at,
                {"type", "replacement", "add_prefix_space", "prepend_scheme", "split", "str_rep"}));
  Step step(Kind::Metaspace);
  LLMC_ASSIGN_OR_RETURN(step.content, getString(value, "replacement", at));
  if (step.content.empty())
    return at.child("replacement").error("must be one character, got an empty string");
  LLMC_ASSIGN_OR_RETURN(auto scheme, getOptionalString(value, "prepend_scheme", at));
  LLMC_ASSIGN_OR_RETURN(bool addPrefixSpace, getBool(value, "add_prefix_space", true, at));
  if (scheme && *scheme != "always" && *scheme != "first" && *scheme != "never")
    return at.child("prepend_scheme")
        .error("unknown value '" + *scheme + "' (expected always, first or never)");
  step.prepend = scheme ? *scheme != "never" : addPrefixSpace;
  step.pattern = Pattern::literal(step.content, *at.source + ": field '" + at.path + "'");
  steps_.push_back(std::move(step));
  return Status::ok();
}

Status Decoder::run(const Step &step, std::vector<std::string> &tokens) {
  switch (step.kind) {
  case Kind::ByteLevel:
    byteLevel(tokens);
    break;
  case Kind::ByteFallback:
    byteFallback(tokens);
    break;
  case Kind::Fuse:
    fuse(tokens);
    break;
  case Kind::Strip:
    for (std::string &token : tokens)
      strip(token, step.content, step.start, step.stop);
    break;
  case Kind::Replace:
    for (std::string &token : tokens)
      LLMC_RETURN_IF_ERROR(
          step.pattern.replaceInPlace(token, step.content, growthLimit(token.size())));
    break;
  case Kind::Metaspace:
    // Hugging Face drops every replacement character of the first token, not only a leading one.
    for (size_t i = 0; i < tokens.size(); ++i)
      LLMC_RETURN_IF_ERROR(step.pattern.replaceInPlace(
          tokens[i], i == 0 && step.prepend ? "" : " ", growthLimit(tokens[i].size())));
    break;
  case Kind::WordPiece:
    wordPiece(tokens, step.content, step.cleanup);
    break;
  case Kind::BpeSuffix:
    bpeSuffix(tokens, step.content);
    break;
  }
  return Status::ok();
}

Expected<std::string> Decoder::decode(std::vector<std::string> tokens) const {
  if (!present_) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i)
      joined += (i ? " " : "") + tokens[i];
    return joined;
  }
  for (const Step &step : steps_)
    LLMC_RETURN_IF_ERROR(run(step, tokens));
  std::string text;
  for (const std::string &token : tokens)
    text += token;
  return text;
}

} // namespace llmc::tok
