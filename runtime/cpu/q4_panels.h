// int4 weights in 16-row panels: the layout the AVX-512 VNNI kernels read
// (matmul_q4_avx512.cpp), made once at load time from the plan's row-major
// layout (kernels/common/q4_layout.h, zero points packed by packQ4Zeros).
//
// Why: the plan's layout gives each row its own stream, so a kernel with
// rows in 32-bit lanes would have to gather 16 rows' words per vector; the
// decode tile that reads the rows as they are (two rows per vector) spends
// a permute per 128 weights, an insert per row pair, and a zero-point term
// and horizontal sums per row. With 16 rows interleaved, one 64-byte load
// holds word l of a pair for 16 rows, every vpdpbusd serves 16 rows with
// x's 4 bytes broadcast, and a block's scales and zero points are one
// vector each: about 1.5x the L2 rate of the two-rows tile on a Zen 4, and
// one memory stream per 16 rows (docs/perf.md, sixteenth pass).
//
// A matrix of N rows is ceil(N / 16) panels of q4PanelShape(K, G).stride
// bytes, panel b holding rows 16b .. 16b + 15 (rows past N are zero). A
// panel is one stream, in the order the kernels read it: a scale unit,
// then the pairs of words up to the next unit, and so on; the zero points
// last, which the kernels read after the words.
//   unit u   [2][16] f16: the scales of groups 2u and 2u + 1 of row
//            16b + r at 32 * (g % 2) + 2 * r (an odd last group leaves
//            32 bytes zero); unit u comes before pair u * m, the pair where
//            group 2u starts, m = G / 32, at q4PanelScalesOffset;
//   pair q   [8][16] u32: word l of pair q (row words 8q .. 8q + 7) of row
//            16b + r at q4PanelWordsOffset(q) + (l * 16 + r) * 4; a half
//            pair (K padded to 32, not 64) has words 4..7 zero;
//   zeros    [ceil(groups / 2)][16] u8 at zerosOffset: byte r of entry h
//            holds row 16b + r's zero points of groups 2h (low nibble) and
//            2h + 1 (high nibble);
// padded to 64 bytes. Every unit and pair starts on a 64-byte line.
//
// Why one stream: with the scales in a region of their own, the pairs and
// the scales were two streams 4 KiB apart that the hardware prefetcher
// followed poorly, and the kernel prefetched in software, at about 24 GB/s
// on one Zen 4 core against 32 for one plain stream (docs/perf.md,
// "int4 panels in one stream").
//
// The values are the plan's, so every kernel's arithmetic and bits are
// those of the row-major layout.
#pragma once

#include "cpu/matmul_q4.h"
#include "support/thread_pool.h"

#include <cstdint>

namespace llmc::cpu {

constexpr int64_t kQ4PanelRows = 16;

struct Q4PanelShape {
  int64_t words = 0;                   // per row, hd::q4WordsPerRow(K)
  int64_t pairs = 0;                   // 64-column pairs of words, detail::q8Pairs(K)
  int64_t groups = 0;                  // per row
  int64_t pairsPerUnit = 0;            // m = G / 32: pairs from one scale unit to the next
  int64_t zerosOffset = 0, stride = 0; // bytes within a panel
};

constexpr int64_t kQ4PanelPairBytes = 8 * kQ4PanelRows * 4; // words of one pair
constexpr int64_t kQ4PanelUnitBytes = 2 * kQ4PanelRows * 2; // scales of two groups

// Byte offsets within a panel: the words of pair q, and group g's 16
// scales (16 f16).
inline int64_t q4PanelWordsOffset(const Q4PanelShape &shape, int64_t q) {
  return q * kQ4PanelPairBytes + (q / shape.pairsPerUnit + 1) * kQ4PanelUnitBytes;
}
inline int64_t q4PanelScalesOffset(const Q4PanelShape &shape, int64_t g) {
  return g / 2 * (kQ4PanelUnitBytes + shape.pairsPerUnit * kQ4PanelPairBytes) +
         g % 2 * (kQ4PanelUnitBytes / 2);
}

Q4PanelShape q4PanelShape(int64_t cols, int64_t groupSize);

inline int64_t q4PanelCount(int64_t rows) { return (rows + kQ4PanelRows - 1) / kQ4PanelRows; }

// Bytes of the panels of an [rows, cols] matrix.
inline int64_t q4PanelBytes(int64_t rows, int64_t cols, int64_t groupSize) {
  return q4PanelCount(rows) * q4PanelShape(cols, groupSize).stride;
}

// Whether matmulQ4 reads panels (Q4Matrix::panels) on this machine:
// x86VnniActive() (cpu/isa.h). Elsewhere the loader makes none.
bool q4PanelsUsed();

// Longest rows the loader lays out in panels: a panel of K = 8192 columns
// (74 KiB at G = 32) pushes x out of L1 between two panels and reads its
// scale units back from L2 for the zero-point term; from DRAM on one Zen 4
// core it decoded at 34.7-35.2 G weights/s where the row-major VNNI decode
// kernel read 37.5-39.6 (G = 32; G = 128: 30.3-42.4 against 48.2-50.8),
// while at K = 2048 the panels read 40.9-51.5 against 36.3-38.2
// (docs/perf.md, "Long int4 panels").
constexpr int64_t kQ4PanelMaxCols = 4096;

// Whether the loader lays an int4 matrix of `cols` columns out in panels
// (q4PanelsUsed() and cols <= kQ4PanelMaxCols); its decode reads the
// row-major words otherwise.
bool q4PanelsFor(int64_t cols);

// Test hook: the longest rows q4PanelsFor lays out (kQ4PanelMaxCols by
// default), so that a small model can take the row-major path too. Not
// thread-safe with loads running.
void setQ4PanelMaxColsForTesting(int64_t cols);

// Writes w's panels (q4PanelBytes, 64-byte aligned) into out.
void buildQ4Panels(ThreadPool &pool, const Q4Matrix &w, uint8_t *out);

} // namespace llmc::cpu
