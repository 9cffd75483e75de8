#include "tokenizer/normalizers.h"

#include <utf8proc.h>

#include <cstdlib>

namespace llmc::tok {

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
  if (type == "Prepend") {
    LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "prepend"}));
    LLMC_ASSIGN_OR_RETURN(std::string prepend, getString(value, "prepend", at));
    steps_.push_back({Kind::Prepend, std::move(prepend), Pattern()});
    return Status::ok();
  }
  if (type == "Replace") {
    LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "pattern", "content"}));
    LLMC_ASSIGN_OR_RETURN(std::string content, getString(value, "content", at));
    const Json *pattern = member(value, "pattern");
    if (pattern == nullptr)
      return at.child("pattern").error("missing (expected {\"String\": ...} or {\"Regex\": ...})");
    LLMC_ASSIGN_OR_RETURN(Pattern parsed, Pattern::fromJson(*pattern, at.child("pattern")));
    steps_.push_back({Kind::Replace, std::move(content), std::move(parsed)});
    return Status::ok();
  }
  const std::pair<const char *, int> forms[] = {
      {"NFC", UTF8PROC_STABLE | UTF8PROC_COMPOSE},
      {"NFD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE},
      {"NFKC", UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT},
      {"NFKD", UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT}};
  for (const auto &[name, options] : forms)
    if (type == name) {
      LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type"}));
      steps_.push_back({Kind::UnicodeForm, "", Pattern(), options});
      return Status::ok();
    }
  return at.child("type").error("unsupported normalizer type '" + type +
                                "' (supported: Prepend, Replace, NFC, NFD, NFKC, NFKD, Sequence)");
}

void Normalizer::normalize(std::string &text) const {
  for (const Step &step : steps_) {
    switch (step.kind) {
    case Kind::Prepend:
      // Hugging Face prepends only to non-empty text.
      if (!text.empty())
        text.insert(0, step.text);
      break;
    case Kind::Replace:
      text = step.pattern.replaceAll(text, step.text);
      break;
    case Kind::UnicodeForm: {
      // The text is valid UTF-8 here (encode repairs it first); on any
      // utf8proc error the text is left as it is.
      utf8proc_uint8_t *out = nullptr;
      utf8proc_ssize_t n =
          utf8proc_map(reinterpret_cast<const utf8proc_uint8_t *>(text.data()),
                       static_cast<utf8proc_ssize_t>(text.size()), &out,
                       static_cast<utf8proc_option_t>(step.utf8procOptions));
      if (n >= 0)
        text.assign(reinterpret_cast<const char *>(out), static_cast<size_t>(n));
      std::free(out);
      break;
    }
    }
  }
}

} // namespace llmc::tok
