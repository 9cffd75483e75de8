// Bounds that keep a hostile tokenizer.json from turning a small prompt into
// gigabytes or minutes of work. Real tokenizers stay far inside them: their
// normalizers and pre-tokenizers at most triple the text (" " -> "▁") and
// insert one character.
#pragma once

#include "support/status.h"

#include <cstddef>
#include <string>

namespace llmc::tok {

// Longest string a Prepend normalizer, a Replace content or a Metaspace
// replacement may insert (checked at import).
inline constexpr size_t kMaxInsertBytes = 256;

// A normalizer's output, and a pre-tokenizer's, may be at most this many
// times its input plus kGrowthSlackBytes (NFKD, the largest legitimate
// growth, writes at most 11 bytes per 3-byte character).
inline constexpr size_t kMaxGrowthFactor = 16;
inline constexpr size_t kGrowthSlackBytes = 4096;

inline size_t growthLimit(size_t inputBytes) {
  return inputBytes * kMaxGrowthFactor + kGrowthSlackBytes;
}

// The error for `component` (e.g. "tokenizer.json: field 'normalizer.normalizers[1]' (Replace)")
// that would grow `inputBytes` of text into `outputBytes`, or ok.
inline Status checkGrowth(const std::string &component, size_t inputBytes, size_t outputBytes) {
  if (outputBytes <= growthLimit(inputBytes))
    return Status::ok();
  return Status::error(component + " would turn " + std::to_string(inputBytes) +
                       " bytes of text into " + std::to_string(outputBytes) +
                       ", more than llmc's bound of " + std::to_string(kMaxGrowthFactor) +
                       " x the input + " + std::to_string(kGrowthSlackBytes) +
                       " bytes (a pattern that matches the empty string, or a long replacement?)");
}

} // namespace llmc::tok
