#include "tokenizer/chars.h"

#include <utf8proc.h>

namespace llmc::tok::chars {
namespace {

utf8proc_category_t categoryOf(char32_t cp) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}

} // namespace

bool isPunctuation(char32_t cp) {
  if (cp < 0x80)
    return (cp >= '!' && cp <= '/') || (cp >= ':' && cp <= '@') || (cp >= '[' && cp <= '`') ||
           (cp >= '{' && cp <= '~');
  switch (categoryOf(cp)) {
  case UTF8PROC_CATEGORY_PC:
  case UTF8PROC_CATEGORY_PD:
  case UTF8PROC_CATEGORY_PS:
  case UTF8PROC_CATEGORY_PE:
  case UTF8PROC_CATEGORY_PI:
  case UTF8PROC_CATEGORY_PF:
  case UTF8PROC_CATEGORY_PO:
    return true;
  default:
    return false;
  }
}

bool isNumeric(char32_t cp) {
  if (cp < 0x80)
    return cp >= '0' && cp <= '9';
  utf8proc_category_t c = categoryOf(cp);
  return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

bool isMark(char32_t cp) {
  utf8proc_category_t c = categoryOf(cp);
  return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
}

bool isNonspacingMark(char32_t cp) { return categoryOf(cp) == UTF8PROC_CATEGORY_MN; }

bool isOther(char32_t cp) {
  utf8proc_category_t c = categoryOf(cp);
  return c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CO;
}

bool isChineseChar(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

bool isWordChar(char32_t cp) {
  if (cp < 0x80)
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') ||
           cp == '_';
  if (cp == 0x200C || cp == 0x200D)
    return true; // Join_Control
  // Other_Alphabetic symbols (circled and squared Latin letters).
  if ((cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
      (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189))
    return true;
  switch (categoryOf(cp)) {
  case UTF8PROC_CATEGORY_LU:
  case UTF8PROC_CATEGORY_LL:
  case UTF8PROC_CATEGORY_LT:
  case UTF8PROC_CATEGORY_LM:
  case UTF8PROC_CATEGORY_LO:
  case UTF8PROC_CATEGORY_NL:
  case UTF8PROC_CATEGORY_MN:
  case UTF8PROC_CATEGORY_MC:
  case UTF8PROC_CATEGORY_ME:
  case UTF8PROC_CATEGORY_ND:
  case UTF8PROC_CATEGORY_PC:
    return true;
  default:
    return false;
  }
}

void appendLowercase(std::string &out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    return;
  }
  if (cp == 0x130) { // the one unconditional two-character lowercase mapping
    out += "i\xCC\x87";
    return;
  }
  utf8::append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
}

} // namespace llmc::tok::chars
