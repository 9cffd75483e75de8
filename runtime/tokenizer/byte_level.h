// The GPT-2 byte-level alphabet: every byte 0..255 is written as one
// printable Unicode character so that byte-level BPE vocabularies are plain
// text. Printable Latin-1 bytes ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF)
// stand for themselves; the other 68 bytes map, in byte order, to U+0100,
// U+0101, ... (so ' ' is U+0120 'Ġ' and '\n' is U+010A 'Ċ').
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace llmc::byte_level {

// The character (as UTF-8, 1 or 2 bytes) that stands for `byte`.
const std::string &charForByte(uint8_t byte);

// The byte that code point `cp` stands for, or -1 if `cp` is not in the alphabet.
int byteForChar(char32_t cp);

// Maps raw bytes to their alphabet characters ("a b" -> "aĠb").
void appendMapped(std::string_view bytes, std::string &out);

// Inverse of appendMapped for one token. Returns false (and leaves `out`
// unchanged) if some character of `token` is not in the alphabet.
bool appendUnmapped(std::string_view token, std::string &out);

} // namespace llmc::byte_level
