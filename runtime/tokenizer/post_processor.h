// tokenizer.json "post_processor": the special tokens that encode() adds
// around the ids when addSpecialTokens is true. Supported: TemplateProcessing
// (its "single" template), RobertaProcessing / BertProcessing (cls A sep),
// ByteLevel (offsets only: no ids) and Sequence of them, applied in order.
#pragma once

#include "tokenizer/json_path.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace llmc::tok {

class PostProcessor {
public:
  // `value` is the "post_processor" field (null: nothing is added). Ids must
  // be below `idEnd`.
  static Expected<PostProcessor> fromJson(const Json &value, const JsonPath &at, int64_t idEnd);

  void addSpecialTokens(std::vector<int32_t> &ids) const;

  // The first / last id that addSpecialTokens puts around the text, if any.
  std::optional<int32_t> leadingId() const;
  std::optional<int32_t> trailingId() const;

private:
  // A single-sequence template: before + text + after.
  struct Wrap {
    std::vector<int32_t> before;
    std::vector<int32_t> after;
  };
  Status parse(const Json &value, const JsonPath &at, int64_t idEnd);
  Status parseTemplate(const Json &value, const JsonPath &at, int64_t idEnd);
  Status parseClsSep(const Json &value, const JsonPath &at, int64_t idEnd);

  std::vector<Wrap> wraps_; // applied in order, innermost first
};

} // namespace llmc::tok
