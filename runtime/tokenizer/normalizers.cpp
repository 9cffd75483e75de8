#include "tokenizer/normalizers.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/chars.h"
#include "tokenizer/limits.h"
#include "tokenizer/utf8.h"

#include <utf8proc.h>

#include <cstdlib>

namespace llmc::tok {
namespace {

const char *const kSupported =
    "Prepend, Replace, NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip, Nmt, "
    "BertNormalizer, ByteLevel, Sequence";

// Rewrites each character of `text` through map(cp, out).
template <typename Map> void mapChars(std::string &text, Map map) {
  std::string out;
  out.reserve(text.size());
  chars::forEachChar(text, [&](char32_t cp) { map(cp, out); });
  text = std::move(out);
}

Status unicodeForm(std::string &text, int options) {
  // The text is valid UTF-8 here (encode repairs it first).
  utf8proc_uint8_t *out = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t *>(text.data()),
                                    static_cast<utf8proc_ssize_t>(text.size()), &out,
                                    static_cast<utf8proc_option_t>(options));
  if (n < 0)
    return Status::error(std::string("utf8proc: ") + utf8proc_errmsg(n));
  text.assign(reinterpret_cast<const char *>(out), static_cast<size_t>(n));
  std::free(out);
  return Status::ok();
}

constexpr int kNfd = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;

// Hugging Face's Nmt normalizer: drops ASCII controls, maps other spaces to ' '.
void nmt(char32_t cp, std::string &out) {
  if ((cp >= 0x01 && cp <= 0x08) || cp == 0x0B || (cp >= 0x0E && cp <= 0x1F) || cp == 0x7F ||
      cp == 0x8F || cp == 0x9F)
    return;
  bool space = cp == 0x09 || cp == 0x0A || cp == 0x0C || cp == 0x0D || cp == 0x1680 ||
               (cp >= 0x200B && cp <= 0x200F) || cp == 0x2028 || cp == 0x2029 || cp == 0x2581 ||
               cp == 0xFEFF || cp == 0xFFFD;
  utf8::append(out, space ? U' ' : cp);
}

void strip(std::string &text, bool left, bool right) {
  size_t begin = 0, end = text.size();
  char32_t cp;
  while (left && begin < end) {
    size_t next = begin;
    if (!utf8::decode(text, next, cp) || !utf8::isWhitespace(cp))
      break;
    begin = next;
  }
  while (right && end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80)
      --start;
    size_t next = start;
    if (!utf8::decode(text, next, cp) || !utf8::isWhitespace(cp))
      break;
    end = start;
  }
  text = text.substr(begin, end - begin);
}

} // namespace

Expected<Normalizer> Normalizer::fromJson(const Json &value, const JsonPath &at) {
  Normalizer normalizer;
  if (!value.is_null())
    LLMC_RETURN_IF_ERROR(normalizer.parse(value, at));
  return normalizer;
}

Status Normalizer::parse(const Json &value, const JsonPath &at) {
  if (!value.is_object())
    return at.wrongType("an object", value);
  LLMC_ASSIGN_OR_RETURN(std::string type, getString(value, "type", at));
  if (type == "Sequence") {
    LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "normalizers"}));
    LLMC_ASSIGN_OR_RETURN(const Json *list, getArray(value, "normalizers", at));
    for (size_t i = 0; i < list->size(); ++i)
      LLMC_RETURN_IF_ERROR(parse((*list)[i], at.child("normalizers").at(i)));
    return Status::ok();
  }
  Step step{Kind::Prepend, *at.source + ": field '" + at.path + "' (" + type + ")"};
  if (type == "Prepend") {
    LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "prepend"}));
    LLMC_ASSIGN_OR_RETURN(step.text, getString(value, "prepend", at));
    if (step.text.size() > kMaxInsertBytes)
      return at.child("prepend").error("is " + std::to_string(step.text.size()) +
                                       " bytes long; llmc accepts at most " +
                                       std::to_string(kMaxInsertBytes));
    steps_.push_back(std::move(step));
    return Status::ok();
  }
  if (type == "Replace") {
    LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "pattern", "content"}));
    step.kind = Kind::Replace;
    LLMC_ASSIGN_OR_RETURN(step.text, getString(value, "content", at));
    if (step.text.size() > kMaxInsertBytes)
      return at.child("content").error("is " + std::to_string(step.text.size()) +
                                       " bytes long; llmc accepts at most " +
                                       std::to_string(kMaxInsertBytes));
    const Json *pattern = member(value, "pattern");
    if (pattern == nullptr)
      return at.child("pattern").error("missing (expected {\"String\": ...} or {\"Regex\": ...})");
    LLMC_ASSIGN_OR_RETURN(step.pattern, Pattern::fromJson(*pattern, at.child("pattern")));
    steps_.push_back(std::move(step));
    return Status::ok();
  }
  if (type == "BertNormalizer")
    return parseBert(value, at, std::move(step));
  if (type == "Strip") {
    LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "strip_left", "strip_right"}));
    step.kind = Kind::Strip;
    LLMC_ASSIGN_OR_RETURN(step.left, getBool(value, "strip_left", true, at));
    LLMC_ASSIGN_OR_RETURN(step.right, getBool(value, "strip_right", true, at));
    steps_.push_back(std::move(step));
    return Status::ok();
  }
  const std::pair<const char *, Kind> plain[] = {{"Lowercase", Kind::Lowercase},
                                                 {"StripAccents", Kind::StripAccents},
                                                 {"Nmt", Kind::Nmt},
                                                 {"ByteLevel", Kind::ByteLevel}};
  for (const auto &[name, kind] : plain)
    if (type == name) {
      LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type"}));
      step.kind = kind;
      steps_.push_back(std::move(step));
      return Status::ok();
    }
  const std::pair<const char *, int> forms[] = {
      {"NFC", UTF8PROC_STABLE | UTF8PROC_COMPOSE},
      {"NFD", kNfd},
      {"NFKC", UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT},
      {"NFKD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT}};
  for (const auto &[name, options] : forms)
    if (type == name) {
      LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type"}));
      step.kind = Kind::UnicodeForm;
      step.utf8procOptions = options;
      steps_.push_back(std::move(step));
      return Status::ok();
    }
  return at.child("type").error("unsupported normalizer type '" + type + "' (supported: " +
                                kSupported + ")");
}

Status Normalizer::parseBert(const Json &value, const JsonPath &at, Step step) {
  LLMC_RETURN_IF_ERROR(checkKeys(
      value, at, {"type", "clean_text", "handle_chinese_chars", "strip_accents", "lowercase"}));
  step.kind = Kind::Bert;
  LLMC_ASSIGN_OR_RETURN(step.left, getBool(value, "clean_text", true, at));
  LLMC_ASSIGN_OR_RETURN(step.right, getBool(value, "handle_chinese_chars", true, at));
  LLMC_ASSIGN_OR_RETURN(step.lowercase, getBool(value, "lowercase", true, at));
  // strip_accents null (or absent) follows lowercase, as in Hugging Face.
  LLMC_ASSIGN_OR_RETURN(step.stripAccents, getBool(value, "strip_accents", step.lowercase, at));
  steps_.push_back(std::move(step));
  return Status::ok();
}

Status Normalizer::run(const Step &step, std::string &text, size_t maxBytes) {
  switch (step.kind) {
  case Kind::Prepend:
    // Hugging Face prepends only to non-empty text.
    if (!text.empty())
      text.insert(0, step.text);
    return Status::ok();
  case Kind::Replace:
    return step.pattern.replaceInPlace(text, step.text, maxBytes);
  case Kind::UnicodeForm:
    return unicodeForm(text, step.utf8procOptions).withContext(step.where);
  case Kind::Lowercase:
    mapChars(text, [](char32_t cp, std::string &out) { chars::appendLowercase(out, cp); });
    return Status::ok();
  case Kind::StripAccents:
    mapChars(text, [](char32_t cp, std::string &out) {
      if (!chars::isMark(cp))
        utf8::append(out, cp);
    });
    return Status::ok();
  case Kind::Strip:
    strip(text, step.left, step.right);
    return Status::ok();
  case Kind::Nmt:
    mapChars(text, nmt);
    return Status::ok();
  case Kind::ByteLevel: {
    std::string mapped;
    byte_level::appendMapped(text, mapped);
    text = std::move(mapped);
    return Status::ok();
  }
  case Kind::Bert:
    if (step.left) // clean_text: drop NUL, U+FFFD and controls; every space becomes ' '
      mapChars(text, [](char32_t cp, std::string &out) {
        bool control = cp != '\t' && cp != '\n' && cp != '\r' && chars::isOther(cp);
        if (cp == 0 || cp == 0xFFFD || control)
          return;
        utf8::append(out, utf8::isWhitespace(cp) ? U' ' : cp);
      });
    if (step.right) // handle_chinese_chars
      mapChars(text, [](char32_t cp, std::string &out) {
        bool pad = chars::isChineseChar(cp);
        if (pad)
          out += ' ';
        utf8::append(out, cp);
        if (pad)
          out += ' ';
      });
    if (step.stripAccents) {
      LLMC_RETURN_IF_ERROR(unicodeForm(text, kNfd).withContext(step.where));
      mapChars(text, [](char32_t cp, std::string &out) {
        if (!chars::isNonspacingMark(cp))
          utf8::append(out, cp);
      });
    }
    if (step.lowercase)
      mapChars(text, [](char32_t cp, std::string &out) { chars::appendLowercase(out, cp); });
    return Status::ok();
  }
  return Status::ok();
}

Status Normalizer::normalize(std::string &text) const {
  size_t maxBytes = growthLimit(text.size());
  size_t inputBytes = text.size();
  for (const Step &step : steps_) {
    LLMC_RETURN_IF_ERROR(run(step, text, maxBytes));
    LLMC_RETURN_IF_ERROR(checkGrowth(step.where, inputBytes, text.size()));
  }
  return Status::ok();
}

} // namespace llmc::tok
