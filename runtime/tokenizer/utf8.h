// UTF-8 helpers for the tokenizer: strict decoding, lossy repair with the
// "maximal subpart" rule (what Rust's String::from_utf8_lossy and Python's
// errors="replace" do, so repaired text matches Hugging Face byte for byte),
// and the Unicode White_Space property (Rust's char::is_whitespace).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace llmc::utf8 {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD"; // U+FFFD

inline void append(std::string &out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Decodes the sequence at s[pos]. On success stores the code point, advances
// pos past it and returns true. On failure returns false and advances pos past
// the maximal subpart of an ill-formed sequence (at least one byte), which is
// the span one U+FFFD replaces.
inline bool decode(std::string_view s, size_t &pos, char32_t &cp) {
  auto byteAt = [&](size_t i) -> uint8_t { return static_cast<uint8_t>(s[i]); };
  uint8_t lead = byteAt(pos);
  if (lead < 0x80) {
    cp = lead;
    ++pos;
    return true;
  }
  int need;
  uint8_t lo = 0x80, hi = 0xBF; // allowed range of the first continuation byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
    cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 2;
    cp = lead & 0x0F;
    lo = lead == 0xE0 ? 0xA0 : 0x80; // no overlong forms
    hi = lead == 0xED ? 0x9F : 0xBF; // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 3;
    cp = lead & 0x07;
    lo = lead == 0xF0 ? 0x90 : 0x80;
    hi = lead == 0xF4 ? 0x8F : 0xBF; // nothing above U+10FFFF
  } else {
    ++pos;
    return false;
  }
  size_t i = pos + 1;
  for (int k = 0; k < need; ++k, ++i) {
    if (i >= s.size() || byteAt(i) < lo || byteAt(i) > hi) {
      pos = i;
      return false;
    }
    cp = (cp << 6) | (byteAt(i) & 0x3F);
    lo = 0x80;
    hi = 0xBF;
  }
  pos = i;
  return true;
}

// Length in bytes of the character that starts with `lead` in valid UTF-8.
inline size_t charLength(uint8_t lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

inline bool isValid(std::string_view s) {
  size_t pos = 0;
  char32_t cp;
  while (pos < s.size()) {
    if (static_cast<uint8_t>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    if (!decode(s, pos, cp))
      return false;
  }
  return true;
}

// Replaces every ill-formed subsequence with U+FFFD (maximal subpart rule).
inline std::string repair(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  char32_t cp;
  while (pos < s.size()) {
    size_t start = pos;
    if (decode(s, pos, cp))
      out.append(s.substr(start, pos - start));
    else
      out.append(kReplacementChar);
  }
  return out;
}

// Unicode White_Space (the set Rust's char::is_whitespace and regex \s use).
inline bool isWhitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

} // namespace llmc::utf8
