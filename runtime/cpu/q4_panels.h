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
// bytes, panel b holding rows 16b .. 16b + 15 (rows past N are zero):
//   words  [pairs][8][16] u32: word l of pair q (row words 8q .. 8q + 7)
//          of row 16b + r at ((q * 8 + l) * 16 + r) * 4; a half pair (K
//          padded to 32, not 64) has words 4..7 zero;
//   scales [groups][16] f16: group g's scale of row 16b + r;
//   zeros  [ceil(groups / 2)][16] u8: byte r of entry h holds row 16b + r's
//          zero points of groups 2h (low nibble) and 2h + 1 (high nibble);
// padded to 64 bytes. The values are the plan's, so every kernel's
// arithmetic and bits are those of the row-major layout.
#pragma once

#include "cpu/matmul_q4.h"
#include "support/thread_pool.h"

#include <cstdint>

namespace llmc::cpu {

constexpr int64_t kQ4PanelRows = 16;

struct Q4PanelShape {
  int64_t words = 0;  // per row, hd::q4WordsPerRow(K)
  int64_t pairs = 0;  // 64-column pairs of words, detail::q8Pairs(K)
  int64_t groups = 0; // per row
  int64_t scalesOffset = 0, zerosOffset = 0, stride = 0; // bytes within a panel
};

Q4PanelShape q4PanelShape(int64_t cols, int64_t groupSize);

inline int64_t q4PanelCount(int64_t rows) { return (rows + kQ4PanelRows - 1) / kQ4PanelRows; }

// Bytes of the panels of an [rows, cols] matrix.
inline int64_t q4PanelBytes(int64_t rows, int64_t cols, int64_t groupSize) {
  return q4PanelCount(rows) * q4PanelShape(cols, groupSize).stride;
}

// Whether matmulQ4 reads panels (Q4Matrix::panels) on this machine:
// x86VnniActive() (cpu/isa.h). Elsewhere the loader makes none.
bool q4PanelsUsed();

// Writes w's panels (q4PanelBytes, 64-byte aligned) into out.
void buildQ4Panels(ThreadPool &pool, const Q4Matrix &w, uint8_t *out);

} // namespace llmc::cpu
