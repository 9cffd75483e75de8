#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

#include <array>

namespace llmc::byte_level {
namespace {

// The highest code point in the alphabet: 0x100 + 68 - 1.
constexpr char32_t kMaxChar = 0x143;

struct Tables {
  std::array<std::string, 256> charOfByte;
  std::array<int16_t, kMaxChar + 1> byteOfChar;

  Tables() {
    byteOfChar.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      char32_t cp = printable ? static_cast<char32_t>(b) : next++;
      utf8::append(charOfByte[b], cp);
      byteOfChar[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables &tables() {
  static const Tables instance;
  return instance;
}

} // namespace

const std::string &charForByte(uint8_t byte) { return tables().charOfByte[byte]; }

int byteForChar(char32_t cp) { return cp <= kMaxChar ? tables().byteOfChar[cp] : -1; }

void appendMapped(std::string_view bytes, std::string &out) {
  const Tables &t = tables();
  for (char c : bytes)
    out += t.charOfByte[static_cast<uint8_t>(c)];
}

bool appendUnmapped(std::string_view token, std::string &out) {
  size_t mark = out.size();
  size_t pos = 0;
  char32_t cp;
  while (pos < token.size()) {
    int byte = utf8::decode(token, pos, cp) ? byteForChar(cp) : -1;
    if (byte < 0) {
      out.resize(mark);
      return false;
    }
    out += static_cast<char>(byte);
  }
  return true;
}

} // namespace llmc::byte_level
