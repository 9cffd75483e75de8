#include "quantize/mixed.h"

#include <cctype>

namespace llmc::quant {
namespace {

std::vector<std::string> split(const std::string &text, char separator) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t end = text.find(separator, begin);
    parts.push_back(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos)
      return parts;
    begin = end + 1;
  }
}

bool allDigits(const std::string &s) {
  if (s.empty() || s.size() > 9) // layer indices, not arbitrary numbers
    return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  return true;
}

bool validComponent(const std::string &s) {
  if (s.empty())
    return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      return false;
  return true;
}

Status ruleError(const std::string &rule, const std::string &what) {
  return Status::error("--mixed rule '" + rule + "': " + what +
                       "; a rule is NAME[@LAYERS]=int4|int8|float, NAME a part of the linear's "
                       "weight name (down_proj, v_proj, mlp, ...), LAYERS N, A-B or A- "
                       "(e.g. --mixed down_proj=int8,v_proj@0-3=int8)");
}

// "N", "A-B" or "A-" into the rule's layer bounds.
Status parseLayers(const std::string &rule, const std::string &text, MixedRule &out) {
  const size_t dash = text.find('-');
  const std::string first = text.substr(0, dash);
  const std::string last = dash == std::string::npos ? first : text.substr(dash + 1);
  if (!allDigits(first) || (!last.empty() && !allDigits(last)))
    return ruleError(rule, "layers '" + text + "' are not N, A-B or A- (decimal layer indices)");
  out.firstLayer = std::stoll(first);
  if (!last.empty())
    out.lastLayer = std::stoll(last);
  if (out.lastLayer && *out.lastLayer < *out.firstLayer)
    return ruleError(rule, "layers '" + text + "' end before they start");
  return Status::ok();
}

} // namespace

const char *linearFormatName(LinearFormat format) {
  switch (format) {
  case LinearFormat::Int4:
    return "int4";
  case LinearFormat::Int8:
    return "int8";
  case LinearFormat::Float:
    return "float";
  }
  return "int4";
}

std::optional<int64_t> decoderLayerOf(const std::string &weightName) {
  for (const std::string &part : split(weightName, '.'))
    if (allDigits(part))
      return std::stoll(part);
  return std::nullopt;
}

bool MixedRule::matches(const std::string &weightName) const {
  bool named = false;
  for (const std::string &part : split(weightName, '.'))
    named = named || part == component;
  if (!named || !firstLayer)
    return named;
  const std::optional<int64_t> layer = decoderLayerOf(weightName);
  return layer && *layer >= *firstLayer && (!lastLayer || *layer <= *lastLayer);
}

LinearFormat MixedRecipe::formatOf(const std::string &weightName) const {
  LinearFormat format = LinearFormat::Int4;
  for (const MixedRule &rule : rules)
    if (rule.matches(weightName))
      format = rule.format;
  return format;
}

Expected<MixedRecipe> parseMixedRecipe(const std::string &text) {
  MixedRecipe recipe;
  recipe.text = text;
  if (text.empty())
    return ruleError(text, "the recipe is empty");
  for (const std::string &rule : split(text, ',')) {
    const size_t equals = rule.find('=');
    if (equals == std::string::npos)
      return ruleError(rule, "no '=FORMAT'");
    MixedRule parsed;
    const std::string format = rule.substr(equals + 1);
    if (format == "int4")
      parsed.format = LinearFormat::Int4;
    else if (format == "int8")
      parsed.format = LinearFormat::Int8;
    else if (format == "float")
      parsed.format = LinearFormat::Float;
    else
      return ruleError(rule, "format '" + format + "' is not int4, int8 or float");
    const std::string target = rule.substr(0, equals);
    const size_t at = target.find('@');
    parsed.component = target.substr(0, at);
    if (!validComponent(parsed.component))
      return ruleError(rule, "name '" + parsed.component +
                                 "' is not one part of a weight name (letters, digits, _)");
    if (at != std::string::npos)
      LLMC_RETURN_IF_ERROR(parseLayers(rule, target.substr(at + 1), parsed));
    recipe.rules.push_back(std::move(parsed));
  }
  return recipe;
}

} // namespace llmc::quant
