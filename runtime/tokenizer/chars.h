// Character classes that Hugging Face's normalizers and pre-tokenizers test,
// from utf8proc's Unicode tables (Rust's char methods and the
// unicode_categories crate on the Hugging Face side).
#pragma once

#include <string>
#include <string_view>

namespace llmc::tok::chars {

// ASCII punctuation (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~) or general category P*.
bool isPunctuation(char32_t cp);
// General category N* (Rust's char::is_numeric).
bool isNumeric(char32_t cp);
// General category M* (Mn, Mc, Me): what StripAccents drops.
bool isMark(char32_t cp);
// General category Mn: what BertNormalizer's strip_accents drops.
bool isNonspacingMark(char32_t cp);
// Cc, Cf or Co (BertNormalizer's "control", minus \t \n \r).
bool isOther(char32_t cp);
// The CJK ideograph blocks that BertNormalizer pads with spaces.
bool isChineseChar(char32_t cp);
// Rust regex's Unicode \w: Alphabetic, marks, Nd, Pc, joiners.
bool isWordChar(char32_t cp);
// Appends Rust's char::to_lowercase of `cp` (one or two characters).
void appendLowercase(std::string &out, char32_t cp);

// Calls visit(cp) for each character of valid UTF-8 `text`.
template <typename Visit> void forEachChar(std::string_view text, Visit visit);

} // namespace llmc::tok::chars

#include "tokenizer/utf8.h"

template <typename Visit>
void llmc::tok::chars::forEachChar(std::string_view text, Visit visit) {
  for (size_t pos = 0; pos < text.size();) {
    char32_t cp = 0xFFFD;
    if (!utf8::decode(text, pos, cp))
      cp = 0xFFFD;
    visit(cp);
  }
}
