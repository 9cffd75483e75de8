// tokenizer.json "normalizer": rewrites each piece of raw text (between added
// tokens) before pre-tokenization. Supported: Prepend, Replace and Sequence
// of them (what Llama 2, Mistral and stories260K use). Anything else is an
// import error.
#pragma once

#include "tokenizer/json_path.h"
#include "tokenizer/regex.h"

#include <string>
#include <vector>

namespace llmc::tok {

class Normalizer {
public:
  // `value` is the "normalizer" field (null means no normalization).
  static Expected<Normalizer> fromJson(const Json &value, const JsonPath &at);

  bool empty() const { return steps_.empty(); }
  void normalize(std::string &text) const;

private:
  enum class Kind { Prepend, Replace };
  struct Step {
    Kind kind;
    std::string text; // Prepend: the prefix; Replace: the replacement
    Pattern pattern;  // Replace only
  };
  Status parse(const Json &value, const JsonPath &at);

  std::vector<Step> steps_; // a Sequence, flattened
};

} // namespace llmc::tok
