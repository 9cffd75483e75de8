// The int8 weight layout of engine plans (W8A16, `--quantize int8`), shared
// by the quantizer, the plan validator, the CPU kernels and the CUDA kernels.
//
// An [N, K] matrix, symmetric int8 per output channel (G = 0: one scale per
// row) or per group of G consecutive columns of a row (G a multiple of 32;
// the last group of a row may be shorter), is stored as two tensors:
//   qweight [N, q8RowBytes(K)] I8: column k of row n at byte k; rows padded
//           with zeros to a multiple of 32 columns.
//   scales  [N, q8NumGroups(K, G)] F32 or F16
// and w[n][k] = q[n][k] * scales[n][k / G] (G = 0: scales[n][0]), q in
// [-127, 127]: -128 is never stored, so the range is symmetric.
//
// Why this layout: rows start 32-byte aligned whatever K is, so CPU vector
// loads and a GPU warp's 16-byte loads need no tail inside a row, and each
// 32-column piece lies in one group (one scale).
#pragma once

#include "kernels/common/half.h"

namespace llmc::hd {

// Columns of one aligned piece; group sizes must be a multiple of it.
constexpr long long kQ8ColumnsPerPiece = 32;
constexpr int kQ8MaxLevel = 127; // |q| <= 127

// Bytes per stored row: K rounded up to whole 32-column pieces.
LLMC_HD constexpr long long q8RowBytes(long long cols) {
  return (cols + kQ8ColumnsPerPiece - 1) / kQ8ColumnsPerPiece * kQ8ColumnsPerPiece;
}

// Columns per group: G, or the whole row for G = 0 (per output channel).
LLMC_HD constexpr long long q8GroupColumns(long long cols, long long groupSize) {
  return groupSize > 0 ? groupSize : cols;
}

// Scales per row: ceil(K / G), 1 for G = 0.
LLMC_HD constexpr long long q8NumGroups(long long cols, long long groupSize) {
  return groupSize > 0 ? (cols + groupSize - 1) / groupSize : 1;
}

// 0 (per output channel) or a positive multiple of 32.
LLMC_HD constexpr bool q8ValidGroupSize(long long groupSize) {
  return groupSize == 0 || (groupSize > 0 && groupSize % kQ8ColumnsPerPiece == 0);
}

// The dequantized weight of column k: row points at the row's bytes, the
// scales (F32, or F16 when `halfScales`) at the row's groups.
LLMC_HD inline float q8Dequant(const signed char *row, const void *scales, bool halfScales,
                               long long k, long long groupSize) {
  const long long g = groupSize > 0 ? k / groupSize : 0;
  const float s = halfScales ? f16ToF32(static_cast<const u16 *>(scales)[g])
                             : static_cast<const float *>(scales)[g];
  return static_cast<float>(row[k]) * s;
}

} // namespace llmc::hd
