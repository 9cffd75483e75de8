// Generic int4 helpers. The packing order of a given quantization format
// (e.g. AWQ's interleaved nibbles) and its group layout are decided by the
// quantization pass; these helpers only extract and dequantize.
#pragma once

#include "kernels/common/half.h"
#include "kernels/common/hd.h"

namespace llmc::hd {

// Nibble `index` (0..7, index 0 = least significant bits) of a 32-bit word,
// as an unsigned value 0..15.
LLMC_HD inline i32 int4Unpack(u32 word, int index) {
  return static_cast<i32>((word >> (4 * index)) & 0xfu);
}

// All eight nibbles, least significant first: out[i] = int4Unpack(word, i).
LLMC_HD inline void int4Unpack8(u32 word, i32 out[8]) {
  for (int i = 0; i < 8; ++i)
    out[i] = int4Unpack(word, i);
}

// Eight nibbles in a caller-given order: out[i] = nibble order[i]. AWQ, for
// instance, stores logical column {0,2,4,6,1,3,5,7}[j] in nibble j, so it reads
// with order = {0,4,1,5,2,6,3,7}.
LLMC_HD inline void int4Unpack8Ordered(u32 word, const i32 order[8], i32 out[8]) {
  for (int i = 0; i < 8; ++i)
    out[i] = int4Unpack(word, order[i]);
}

// Asymmetric dequantization: (q - zero) * scale.
LLMC_HD inline float int4Dequant(i32 q, i32 zero, float scale) {
  return static_cast<float>(q - zero) * scale;
}

// Nibble `index` of `word` minus a zero point, as a float, without an
// int-to-float conversion (quarter rate on GPUs, where it would bound the
// W4A16 GEMV below the memory bandwidth): OR-ing the nibble into the
// mantissa of 2^23 gives the float 2^23 + q exactly, and subtracting
// magicZero = int4MagicZero(zero) = 2^23 + zero leaves q - zero exactly.
LLMC_HD inline float int4MagicZero(float zero) { return 8388608.0f + zero; }
LLMC_HD inline float int4MinusMagicZero(u32 word, int index, float magicZero) {
  return bitsToFloat(((word >> (4 * index)) & 0xfu) | 0x4b000000u) - magicZero;
}

// The W4A16 GEMV's paired form: two weights per instruction as a bf16 pair
// (the device's lop3.b32 and fma.rn.bf16x2). int4PairBf16x2 takes nibbles s
// and s + 4 (s = 0..3) of `word` into the mantissas of two bf16 128.0
// (0x4300), low half first: the pair (128 + q_s, 128 + q_{s+4}) exactly.
// One bf16x2 FMA, pair * 1 - (128 + zero), then leaves q - zero in each half
// exactly (an integer in [-127, 15]), the value int4MinusMagicZero gives,
// when int4ZeroFitsBf16x2(zero); int4PairMinusMagicZero is that FMA on the
// host, for one half.
LLMC_HD inline u32 int4PairBf16x2(u32 word, int s) {
  return ((word >> (4 * s)) & 0x000f000fu) | 0x43004300u;
}
LLMC_HD inline bool int4ZeroFitsBf16x2(float zero) { return zero >= 0.0f && zero <= 127.0f; }
// -(128 + zero) in bf16 (rounded to nearest even, as 2^23 + zero rounds in
// int4MagicZero), in both halves.
LLMC_HD inline u32 int4NegMagicZeroBf16x2(float zero) {
  const u32 b = f32ToBf16(128.0f + zero) | 0x8000u;
  return b | (b << 16);
}
LLMC_HD inline float int4PairMinusMagicZero(u32 pair, u32 negMagic, int half) {
  const float v = bf16ToF32(static_cast<u16>(pair >> (16 * half)));
  const float m = bf16ToF32(static_cast<u16>(negMagic >> (16 * half)));
  return bf16ToF32(f32ToBf16(v + m)); // v * 1 + m, rounded once to bf16
}

// Packs eight values 0..15 (least significant first); the inverse of int4Unpack8.
LLMC_HD inline u32 int4Pack8(const i32 values[8]) {
  u32 word = 0;
  for (int i = 0; i < 8; ++i)
    word |= (static_cast<u32>(values[i]) & 0xfu) << (4 * i);
  return word;
}

} // namespace llmc::hd
