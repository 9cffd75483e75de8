// Round-to-nearest int4 coding of one quantization group, shared by the
// quantizer (compiler/quantize/q4_quantize.cpp) and the generators of
// synthetic int4 weights (CPU: engine/weights.cpp, CUDA: elementwise.cuh),
// so that both produce the same stored bytes. The rule (AWQ's
// pseudo_quantize_tensor with zero points, the range widened to hold 0):
//   lo = min(min(w), 0), hi = max(max(w), 0)
//   scale = max(hi - lo, 1e-5) / 15, rounded to f16 (the smallest positive
//           f16 if that underflows)
//   zero  = clamp(-rint(lo / scale), 0, 15)
//   q     = clamp(rint(w / scale) + zero, 0, 15),  w ~ (q - zero) * scale.
#pragma once

#include "kernels/common/half.h"
#include "kernels/common/q4_layout.h"
#include "kernels/common/synthetic.h"

namespace llmc::hd {

// One group's f16 scale and zero point, and their float values.
struct Q4Code {
  u16 scale, zero;
  float scaleF, zeroF;
};

LLMC_HD inline float clampF(float x, float lo, float hi) { return x < lo ? lo : hi < x ? hi : x; }

// The coding of a group whose values span [lo, hi], lo <= 0 <= hi.
LLMC_HD inline Q4Code q4CodeForRange(float lo, float hi) {
  Q4Code c;
  const float range = hi - lo < 1e-5f ? 1e-5f : hi - lo;
  c.scale = f32ToF16(range / 15.0f);
  c.scaleF = f16ToF32(c.scale);
  if (c.scaleF <= 0.0f) { // underflowed f16: the smallest positive one
    c.scale = 1;
    c.scaleF = f16ToF32(1);
  }
  c.zeroF = clampF(-rintF(lo / c.scaleF), 0.0f, 15.0f);
  c.zero = f32ToF16(c.zeroF);
  return c;
}

// The stored value 0..15 of w.
LLMC_HD inline i32 q4QuantizeValue(float w, const Q4Code &c) {
  return static_cast<i32>(clampF(rintF(w / c.scaleF) + c.zeroF, 0.0f, 15.0f));
}

// --- Synthetic int4 weights (SyntheticKind Q4Weight / Q4Scales / Q4Zeros):
// the coding of w[r][k] = stddev * syntheticNormal(seed, r * cols + k), a
// [rows, cols] matrix in groups of G columns. Work is split by (row, group)
// cells, each computed independently (twice the normals of the group for
// the words: one pass for the range, one for the values).
struct SyntheticQ4 {
  u64 seed;
  float stddev;
  long long cols, groupSize;

  LLMC_HD float value(long long row, long long k) const {
    return stddev * syntheticNormal(seed, static_cast<u64>(row * cols + k));
  }

  // The coding of group g of row `row`.
  LLMC_HD Q4Code code(long long row, long long g) const {
    const long long begin = g * groupSize;
    const long long end = begin + groupSize < cols ? begin + groupSize : cols;
    float lo = 0.0f, hi = 0.0f;
    for (long long k = begin; k < end; ++k) {
      const float w = value(row, k);
      lo = w < lo ? w : lo;
      hi = hi < w ? w : hi;
    }
    return q4CodeForRange(lo, hi);
  }

  // Writes the stored words of group g into rowWords (the row's
  // q4WordsPerRow(cols) words); the last group also writes the row's pad
  // nibbles (its zero point, so they dequantize to 0).
  LLMC_HD void writeGroupWords(long long row, long long g, const Q4Code &c, u32 *rowWords) const {
    const long long groups = q4NumGroups(cols, groupSize);
    const long long firstWord = g * groupSize / 8;
    const long long endWord =
        g + 1 == groups ? q4WordsPerRow(cols) : (g + 1) * groupSize / 8; // G % 32 == 0
    for (long long j = firstWord; j < endWord; ++j) {
      u32 word = 0;
      for (int i = 0; i < 8; ++i) {
        const long long k = 8 * j + i;
        const i32 q = k < cols ? q4QuantizeValue(value(row, k), c) : static_cast<i32>(c.zeroF);
        word |= static_cast<u32>(q) << (4 * i);
      }
      rowWords[j] = word;
    }
  }
};

} // namespace llmc::hd
