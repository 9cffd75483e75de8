#include "tokenizer/normalizers.h"

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
  return at.child("type").error("unsupported normalizer type '" + type +
                                "' (supported: Prepend, Replace, Sequence)");
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
    }
  }
}

} // namespace llmc::tok
