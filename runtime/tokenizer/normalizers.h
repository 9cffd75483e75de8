// tokenizer.json "normalizer": rewrites each piece of raw text (between added
// tokens) before pre-tokenization. Supported, with Hugging Face's semantics:
//   Prepend, Replace            (Llama 2, Mistral, stories260K)
//   NFC, NFD, NFKC, NFKD        (Unicode normal forms, through utf8proc)
//   Lowercase                   (per character, full mappings: "İ" -> "i̇")
//   StripAccents                (drops marks: general category M)
//   Strip                       (strip_left / strip_right of White_Space)
//   Nmt                         (drops ASCII controls, maps odd spaces to ' ')
//   BertNormalizer              (clean_text, handle_chinese_chars,
//                                strip_accents, lowercase)
//   ByteLevel                   (bytes -> GPT-2 alphabet characters)
//   Sequence of them.
// Anything else is an import error naming the type and the JSON path. Every
// step's output is bounded (limits.h): a step that would grow the text
// beyond the bound fails with an error naming the step.
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
  // Fails on a regex PCRE2 gives up on, or output beyond the bound.
  Status normalize(std::string &text) const;

private:
  enum class Kind { Prepend, Replace, UnicodeForm, Lowercase, StripAccents, Strip, Nmt, Bert,
                    ByteLevel };
  struct Step {
    Kind kind;
    std::string where;       // "file: field 'normalizer.normalizers[1]' (Replace)"
    std::string text;        // Prepend: the prefix; Replace: the replacement
    Pattern pattern;         // Replace only
    int utf8procOptions = 0; // UnicodeForm only: utf8proc_map options
    bool left = false;       // Strip: strip_left; Bert: clean_text
    bool right = false;      // Strip: strip_right; Bert: handle_chinese_chars
    bool stripAccents = false; // Bert
    bool lowercase = false;    // Bert
  };
  Status parse(const Json &value, const JsonPath &at);
  Status parseBert(const Json &value, const JsonPath &at, Step step);
  static Status run(const Step &step, std::string &text, size_t maxBytes);

  std::vector<Step> steps_; // a Sequence, flattened
};

} // namespace llmc::tok
