// The int4 weight layout of engine plans (docs/engine-format.md, "Quantized
// linear weights"), shared by the quantizer, the plan validator, the CPU
// kernels and the CUDA kernels.
//
// An [N, K] matrix quantized in groups of G consecutive columns per row
// (G a multiple of 32; the last group of a row may be shorter) is stored as
// three tensors:
//   qweight [N, q4WordsPerRow(K)] u32 (I32 in the plan): word j of row n holds
//           columns 8j .. 8j + 7, column 8j + i in nibble i (bits 4i .. 4i + 3).
//           Rows are padded to a multiple of 32 columns (16 bytes); the pad
//           nibbles hold the last group's zero point, so they dequantize to 0.
//   scales  [N, q4NumGroups(K, G)] f16
//   zeros   [N, q4NumGroups(K, G)] f16, integral values 0 .. 15
// and w[n][k] = (q[n][k] - zeros[n][k / G]) * scales[n][k / G].
//
// Why this layout: a GPU warp streams one row with coalesced 16-byte loads,
// each load covers 32 columns of a single group (G % 32 == 0), so it needs
// one scale and one zero; rows start 16-byte aligned whatever K is.
#pragma once

#include "kernels/common/half.h"
#include "kernels/common/int4.h"

namespace llmc::hd {

// Columns per 16-byte load; group sizes must be a multiple of it.
constexpr long long kQ4ColumnsPerLoad = 32;

// u32 words per stored row: K rounded up to 32 columns, 8 columns per word.
LLMC_HD inline long long q4WordsPerRow(long long cols) {
  return (cols + kQ4ColumnsPerLoad - 1) / kQ4ColumnsPerLoad * (kQ4ColumnsPerLoad / 8);
}

// Groups per row: ceil(K / G).
LLMC_HD inline long long q4NumGroups(long long cols, long long groupSize) {
  return (cols + groupSize - 1) / groupSize;
}

LLMC_HD inline bool q4ValidGroupSize(long long groupSize) {
  return groupSize > 0 && groupSize % kQ4ColumnsPerLoad == 0;
}

// The quantized value 0..15 of column k of a stored row.
LLMC_HD inline i32 q4At(const u32 *row, long long k) {
  return int4Unpack(row[k / 8], static_cast<int>(k % 8));
}

// The dequantized weight of column k: row points at the row's words, scales
// and zeros at the row's groups.
LLMC_HD inline float q4Dequant(const u32 *row, const u16 *scales, const u16 *zeros, long long k,
                               long long groupSize) {
  long long g = k / groupSize;
  return (static_cast<float>(q4At(row, k)) - f16ToF32(zeros[g])) * f16ToF32(scales[g]);
}

} // namespace llmc::hd
