#include "tokenizer/post_processor.h"

namespace llmc::tok {

Expected<PostProcessor> PostProcessor::fromJson(const Json &value, const JsonPath &at,
                                                int64_t idEnd) {
  PostProcessor post;
  if (!value.is_null())
    LLMC_RETURN_IF_ERROR(post.parse(value, at, idEnd));
  return post;
}

Status PostProcessor::parse(const Json &value, const JsonPath &at, int64_t idEnd) {
  if (!value.is_object())
    return at.wrongType("an object", value);
  LLMC_ASSIGN_OR_RETURN(std::string type, getString(value, "type", at));
  if (type == "Sequence") {
    LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "processors"}));
    LLMC_ASSIGN_OR_RETURN(const Json *list, getArray(value, "processors", at));
    for (size_t i = 0; i < list->size(); ++i)
      LLMC_RETURN_IF_ERROR(parse((*list)[i], at.child("processors").at(i), idEnd));
    return Status::ok();
  }
  if (type == "ByteLevel")
    return checkKeys(value, at, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
  if (type == "TemplateProcessing")
    return parseTemplate(value, at, idEnd);
  if (type == "RobertaProcessing" || type == "BertProcessing")
    return parseClsSep(value, at, idEnd);
  return at.child("type").error("unsupported post-processor type '" + type +
                                "' (supported: TemplateProcessing, ByteLevel, RobertaProcessing, "
                                "BertProcessing, Sequence)");
}

Status PostProcessor::parseTemplate(const Json &value, const JsonPath &at, int64_t idEnd) {
  LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "single", "pair", "special_tokens"}));
  const Json *specials = member(value, "special_tokens");
  JsonPath specialsAt = at.child("special_tokens");
  if (specials != nullptr && !specials->is_object())
    return specialsAt.wrongType("an object", *specials);
  LLMC_ASSIGN_OR_RETURN(const Json *single, getArray(value, "single", at));
  Wrap wrap;
  bool sawSequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const Json &piece = (*single)[i];
    JsonPath pieceAt = at.child("single").at(i);
    if (const Json *sequence = piece.is_object() ? member(piece, "Sequence") : nullptr) {
      LLMC_ASSIGN_OR_RETURN(std::string id, getString(*sequence, "id", pieceAt.child("Sequence")));
      if (id != "A" || sawSequence)
        return pieceAt.error("the single template must hold sequence A exactly once");
      sawSequence = true;
      continue;
    }
    const Json *special = piece.is_object() ? member(piece, "SpecialToken") : nullptr;
    if (special == nullptr)
      return pieceAt.error("expected {\"Sequence\": ...} or {\"SpecialToken\": ...}, got " +
                           piece.dump());
    LLMC_ASSIGN_OR_RETURN(std::string name,
                          getString(*special, "id", pieceAt.child("SpecialToken")));
    const Json *entry = specials ? member(*specials, name.c_str()) : nullptr;
    if (entry == nullptr || !entry->is_object())
      return specialsAt.error("no entry for '" + name + "', which the single template uses");
    LLMC_ASSIGN_OR_RETURN(const Json *ids, getArray(*entry, "ids", specialsAt.child(name)));
    for (size_t k = 0; k < ids->size(); ++k) {
      const Json &id = (*ids)[k];
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= idEnd)
        return specialsAt.child(name).child("ids").at(k).error(
            "expected a token id in [0, " + std::to_string(idEnd) + "), got " + id.dump());
      (sawSequence ? wrap.after : wrap.before).push_back(id.get<int32_t>());
    }
  }
  if (!sawSequence)
    return at.child("single").error("the template has no sequence A");
  wraps_.push_back(std::move(wrap));
  return Status::ok();
}

Status PostProcessor::parseClsSep(const Json &value, const JsonPath &at, int64_t idEnd) {
  LLMC_RETURN_IF_ERROR(
      checkKeys(value, at, {"type", "sep", "cls", "trim_offsets", "add_prefix_space"}));
  Wrap wrap;
  for (const char *key : {"cls", "sep"}) {
    const Json *pair = member(value, key);
    if (pair == nullptr || !pair->is_array() || pair->size() != 2 ||
        !(*pair)[1].is_number_integer())
      return at.child(key).error("expected [\"token\", id]");
    int64_t id = (*pair)[1].get<int64_t>();
    if (id < 0 || id >= idEnd)
      return at.child(key).error("id " + std::to_string(id) + " is out of range [0, " +
                                 std::to_string(idEnd) + ")");
    (std::string(key) == "cls" ? wrap.before : wrap.after).push_back(static_cast<int32_t>(id));
  }
  wraps_.push_back(std::move(wrap));
  return Status::ok();
}

void PostProcessor::addSpecialTokens(std::vector<int32_t> &ids) const {
  for (const Wrap &wrap : wraps_) {
    ids.insert(ids.begin(), wrap.before.begin(), wrap.before.end());
    ids.insert(ids.end(), wrap.after.begin(), wrap.after.end());
  }
}

std::optional<int32_t> PostProcessor::leadingId() const {
  for (auto wrap = wraps_.rbegin(); wrap != wraps_.rend(); ++wrap)
    if (!wrap->before.empty())
      return wrap->before.front();
  return std::nullopt;
}

std::optional<int32_t> PostProcessor::trailingId() const {
  for (auto wrap = wraps_.rbegin(); wrap != wraps_.rend(); ++wrap)
    if (!wrap->after.empty())
      return wrap->after.back();
  return std::nullopt;
}

} // namespace llmc::tok
