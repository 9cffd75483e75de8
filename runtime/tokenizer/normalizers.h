// tokenizer.json "normalizer": rewrites each piece of raw text (between added
// tokens) before pre-tokenization. Supported: Prepend, Replace (Llama 2,
// Mistral, stories260K), the Unicode normal forms NFC, NFD, NFKC and NFKD
// (Qwen2 uses NFC; through utf8proc) and Sequence of them. Anything else is
// an import error.
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
  enum class Kind { Prepend, Replace, UnicodeForm };
  struct Step {
    Kind kind;
    std::string text; // Prepend: the prefix; Replace: the replacement
    Pattern pattern;  // Replace only
    int utf8procOptions = 0; // UnicodeForm only: utf8proc_map options
  };
  Status parse(const Json &value, const JsonPath &at);

  std::vector<Step> steps_; // a Sequence, flattened
};

} // namespace llmc::tok
