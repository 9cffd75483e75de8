// bf16 weights in 12 bits, losslessly: the layout the bf16 dot-product
// kernels (matmul_bf16_avx512.cpp) read where the CPU has AVX512-VBMI, made
// once at load time from the plan's bf16 for every matrix the CPU programs
// multiply by (LoadedWeights).
//
// Why: decode streams every matrix once per token, so its speed is bytes
// over bandwidth; first made for the bf16 head an int4 plan keeps
// (--quantize-lm-head is off by default: at 110M half of a step's bytes),
// then for every matrix of a bf16 plan (a 1B bf16 decode step streams 1.56
// GB instead of 2.05). A bf16 word is a high byte (sign and the exponent's
// top 7 bits) and a low byte (the exponent's last bit and 7 mantissa bits).
// Weights span few exponents: the 16 most frequent high bytes of a matrix
// hold all but about 1e-4 of its weights (the tiniest, for normal weights).
// So each weight keeps its low byte and a 4-bit code into the matrix's
// table of 16 high bytes; a 32-column step with a high byte the table lacks
// keeps its 32 high bytes whole, beside. The kernels rebuild the exact
// words (vpmultishiftqb + vpermb), so sums and bits are those of the plain
// bf16 kernels; a matrix streams 12 bits a weight, not 16 (docs/perf.md,
// "The lm_head in 12 bits", "Every bf16 matrix in 12 bits"). The prefill
// GEMM rebuilds the words into its panels the same way.
//
// Layout of an [N, K] matrix, S = codedBf16Steps(K) steps of 32 columns a row:
//   table           [64] u8: the 16 high bytes, 4 times (vpermb reads 6 bits);
//   steps           [N][S][48] u8: step s of row n is 32 low bytes (columns
//                   32s .. 32s + 31, 0 past K), then 16 bytes of codes,
//                   column 32s + j's in nibble j (byte j / 2, low nibble first);
//   exceptionBegin  [N + 1] u32: row n's exceptions are [begin[n], begin[n + 1]);
//   exceptionStep   [E] u32: the step of each, ascending within a row;
//   exceptionHigh   [E][32] u8: that step's high bytes (0 past K); its codes
//                   in `steps` are 0 and read by no kernel.
#pragma once

#include "cpu/weights.h"
#include "support/thread_pool.h"

#include <array>
#include <cstdint>
#include <vector>

namespace llmc::cpu {

constexpr int64_t kCodedBf16StepColumns = 32;
constexpr int64_t kCodedBf16StepBytes = 48;
constexpr int kCodedBf16Codes = 16;

inline int64_t codedBf16Steps(int64_t cols) {
  return (cols + kCodedBf16StepColumns - 1) / kCodedBf16StepColumns;
}

// Whether the loader codes bf16 matrices for the bf16 kernels
// (WeightMatrix::coded): x86Bf16Active() and AVX512-VBMI (cpu/isa.h), unless
// the environment (LLMC_CPU_CODED_BF16=0, read once) or a test turned it
// off. Elsewhere the loader makes none.
bool codedBf16Used();

// Test hook: turns coding at load time on or off (plans loaded before keep
// what they have). Not thread-safe with loads running.
void setCodedBf16ForTesting(bool use);

// What buildCodedBf16 needs: the table and where each row's exceptions go.
struct CodedBf16Layout {
  std::array<uint8_t, kCodedBf16Codes> highBytes{}; // code c -> high byte
  std::vector<uint32_t> exceptionBegin;             // [N + 1]
  uint64_t bytes = 0;                               // of the whole layout, 64-byte multiples

  uint32_t exceptions() const { return exceptionBegin.empty() ? 0 : exceptionBegin.back(); }
};

// Bytes of the layout of an [rows, cols] matrix with `exceptions`
// exceptions (64-byte multiples).
uint64_t codedBf16Bytes(int64_t rows, int64_t cols, uint32_t exceptions);

// Reads the bf16 matrix w twice: the frequencies of its high bytes, then
// the steps each row cannot code.
CodedBf16Layout planCodedBf16(ThreadPool &pool, const WeightMatrix &w);

// Whether coding w as `layout` says reads at most 80% of its bf16 bytes
// (few exceptions); otherwise the loader keeps the plain bf16 rows.
bool codedBf16Pays(const WeightMatrix &w, const CodedBf16Layout &layout);

// Writes the table and the exceptions' offsets of w coded as `layout` into
// out (layout.bytes, 64-byte aligned) and returns the view of it, valid
// once codeBf16Rows has written every row.
CodedBf16 startCodedBf16(const WeightMatrix &w, const CodedBf16Layout &layout, uint8_t *out);

// Writes rows [rowBegin, rowEnd) of w into out (as startCodedBf16): a
// loader codes a large matrix a block at a time.
void codeBf16Rows(ThreadPool &pool, const WeightMatrix &w, const CodedBf16Layout &layout,
                  uint8_t *out, int64_t rowBegin, int64_t rowEnd);

// Both, for every row.
CodedBf16 buildCodedBf16(ThreadPool &pool, const WeightMatrix &w, const CodedBf16Layout &layout,
                         uint8_t *out);

// The view of rows [first, N) of a coded matrix of `cols` columns (as a
// WeightMatrix of rows from `first`).
CodedBf16 codedBf16From(const CodedBf16 &coded, int64_t cols, int64_t first);

// The bf16 word at (row, col) of a coded matrix of `cols` columns: the
// kernels' decoding, one weight at a time (tests).
uint16_t codedBf16Word(const CodedBf16 &coded, int64_t cols, int64_t row, int64_t col);

} // namespace llmc::cpu
