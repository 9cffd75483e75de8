#include "cpu/bf16_coded.h"

#include "cpu/isa.h"
#include "support/align.h"
#include "support/env.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <numeric>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace llmc::cpu {
namespace {

constexpr uint64_t kTableBytes = 64;

// Where each part of a coded [rows, cols] matrix with `exceptions`
// exceptions starts, in bytes from the layout's start.
struct CodedBf16Offsets {
  uint64_t steps, exceptionBegin, exceptionStep, exceptionHigh, end;
};

CodedBf16Offsets codedOffsets(int64_t rows, int64_t cols, uint64_t exceptions) {
  CodedBf16Offsets o{};
  o.steps = kTableBytes;
  o.exceptionBegin =
      o.steps +
      alignUp(static_cast<uint64_t>(rows * codedBf16Steps(cols) * kCodedBf16StepBytes), 64);
  o.exceptionStep = o.exceptionBegin + alignUp(static_cast<uint64_t>(rows + 1) * 4, 64);
  o.exceptionHigh = o.exceptionStep + alignUp(exceptions * 4, 64);
  o.end = o.exceptionHigh + exceptions * kCodedBf16StepColumns;
  return o;
}

const uint16_t *bf16Row(const WeightMatrix &w, int64_t row) {
  return static_cast<const uint16_t *>(w.data) + row * w.cols;
}

// Row chunks of about 256 KiB of bf16 for the pool.
int64_t rowGrain(const WeightMatrix &w) {
  return std::max<int64_t>(1, (int64_t{1} << 18) / (2 * w.cols));
}

// code + 1 of each high byte, 0 for one the table lacks.
std::array<uint8_t, 256> codesOf(const std::array<uint8_t, kCodedBf16Codes> &highBytes) {
  std::array<uint8_t, 256> codes{};
  for (int c = kCodedBf16Codes - 1; c >= 0; --c) // the first code of a repeated byte wins
    codes[highBytes[c]] = static_cast<uint8_t>(c + 1);
  return codes;
}

// Whether step s of `row` (cols columns) has a high byte the table lacks.
bool stepIsException(const uint16_t *row, int64_t cols, int64_t s,
                     const std::array<uint8_t, 256> &codes) {
  const int64_t end = std::min(cols, (s + 1) * kCodedBf16StepColumns);
  for (int64_t c = s * kCodedBf16StepColumns; c < end; ++c)
    if (codes[row[c] >> 8] == 0)
      return true;
  return false;
}

// The 16 most frequent high bytes of every k-th row (at least 2048 rows),
// most frequent first (ties: the smaller byte); fewer than 16 in use repeat
// the first. A sample is enough: a byte it misses costs exceptions, not
// exactness, and the rows' other two passes are whole.
std::array<uint8_t, kCodedBf16Codes> mostFrequentHighBytes(ThreadPool &pool,
                                                           const WeightMatrix &w) {
  const int64_t k = std::max<int64_t>(1, w.rows / 2048);
  std::array<uint64_t, 256> counts{};
  std::mutex merge;
  pool.parallelFor((w.rows + k - 1) / k,
                   [&](int64_t begin, int64_t end) {
                     std::array<uint64_t, 256> mine{};
                     for (int64_t r = begin * k; r < std::min(w.rows, end * k); r += k) {
                       const uint16_t *row = bf16Row(w, r);
                       for (int64_t c = 0; c < w.cols; ++c)
                         ++mine[row[c] >> 8];
                     }
                     std::lock_guard<std::mutex> lock(merge);
                     for (int b = 0; b < 256; ++b)
                       counts[b] += mine[b];
                   },
                   rowGrain(w));
  std::array<int, 256> order;
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return counts[a] > counts[b]; });
  std::array<uint8_t, kCodedBf16Codes> table{};
  for (int c = 0; c < kCodedBf16Codes; ++c)
    table[c] = static_cast<uint8_t>(counts[order[c]] > 0 ? order[c] : order[0]);
  return table;
}

// Writes step s of `row` into `step` (48 bytes); returns whether it is an
// exception (a high byte the table lacks, whose code stays 0).
bool writeStep(const uint16_t *row, int64_t cols, int64_t s, const std::array<uint8_t, 256> &codes,
               uint8_t *step) {
  bool exception = false;
  std::memset(step, 0, kCodedBf16StepBytes);
  const int64_t first = s * kCodedBf16StepColumns;
  const int64_t count = std::min(cols - first, kCodedBf16StepColumns);
  for (int64_t j = 0; j < count; ++j) {
    const uint16_t word = row[first + j];
    step[j] = static_cast<uint8_t>(word & 0xff);
    const uint8_t codePlusOne = codes[word >> 8];
    exception |= codePlusOne == 0;
    const uint8_t code = codePlusOne == 0 ? 0 : codePlusOne - 1;
    step[kCodedBf16StepColumns + j / 2] |= static_cast<uint8_t>(code << (4 * (j & 1)));
  }
  return exception;
}

#if defined(__x86_64__)
#define LLMC_CODED_VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))

// The whole steps [0, wholeSteps) of `row` with AVX512-VBMI: each step's 32
// words in one load, their high bytes looked up in `codes` (code + 1, 256
// entries) with two vpermi2b. With `steps` (the row's first step), writes
// each as writeStep does (the same bytes); calls onException(s) for each
// step holding a high byte the table lacks, in order.
template <class OnException>
LLMC_CODED_VBMI void codeWholeStepsVbmi(const uint16_t *row, int64_t wholeSteps,
                                        const std::array<uint8_t, 256> &codes, uint8_t *steps,
                                        const OnException &onException) {
  __m512i table[4];
  for (int t = 0; t < 4; ++t)
    table[t] = _mm512_loadu_si512(codes.data() + 64 * t);
  const __m256i one = _mm256_set1_epi8(1);
  const __m256i nibblePairs = _mm256_set1_epi16(0x1001); // code j + 16 * code j + 1
  for (int64_t s = 0; s < wholeSteps; ++s) {
    const __m512i words = _mm512_loadu_si512(row + s * kCodedBf16StepColumns);
    const __m512i high = _mm512_castsi256_si512(_mm512_cvtepi16_epi8(_mm512_srli_epi16(words, 8)));
    const __m512i low128 = _mm512_permutex2var_epi8(table[0], high, table[1]);
    const __m512i high128 = _mm512_permutex2var_epi8(table[2], high, table[3]);
    const __m256i codePlusOne =
        _mm512_castsi512_si256(_mm512_mask_blend_epi8(_mm512_movepi8_mask(high), low128, high128));
    if (steps != nullptr) {
      uint8_t *step = steps + s * kCodedBf16StepBytes;
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(step), _mm512_cvtepi16_epi8(words));
      // code + 1 - 1, 0 for a byte the table lacks; two codes a byte.
      const __m256i code = _mm256_subs_epu8(codePlusOne, one);
      _mm_storeu_si128(reinterpret_cast<__m128i *>(step + kCodedBf16StepColumns),
                       _mm256_cvtepi16_epi8(_mm256_maddubs_epi16(code, nibblePairs)));
    }
    if (_mm256_testn_epi8_mask(codePlusOne, codePlusOne) != 0)
      onException(s);
  }
}
#endif

// Steps of `cols` columns codeWholeStepsVbmi may take: the whole ones where
// the CPU has AVX512-VBMI, none elsewhere (writeStep takes every step).
int64_t vbmiSteps(int64_t cols) {
#if defined(__x86_64__)
  if (x86VbmiSupported())
    return cols / kCodedBf16StepColumns;
#endif
  (void)cols;
  return 0;
}

// On unless LLMC_CPU_CODED_BF16=0 (read once) or a test turned it off.
std::atomic<bool> &codedBf16InUse() {
  static std::atomic<bool> use{envSwitchOn("LLMC_CPU_CODED_BF16")};
  return use;
}

} // namespace

bool codedBf16Used() {
  return x86Bf16Active() && x86VbmiSupported() && codedBf16InUse().load(std::memory_order_relaxed);
}

void setCodedBf16ForTesting(bool use) { codedBf16InUse().store(use, std::memory_order_relaxed); }

uint64_t codedBf16Bytes(int64_t rows, int64_t cols, uint32_t exceptions) {
  return alignUp(codedOffsets(rows, cols, exceptions).end, 64);
}

CodedBf16Layout planCodedBf16(ThreadPool &pool, const WeightMatrix &w) {
  CodedBf16Layout layout;
  layout.highBytes = mostFrequentHighBytes(pool, w);
  const std::array<uint8_t, 256> codes = codesOf(layout.highBytes);
  const int64_t steps = codedBf16Steps(w.cols);
  std::vector<uint32_t> perRow(static_cast<size_t>(w.rows));
  pool.parallelFor(
      w.rows,
      [&](int64_t begin, int64_t end) {
        const int64_t vectorSteps = vbmiSteps(w.cols);
        for (int64_t r = begin; r < end; ++r) {
          uint32_t count = 0;
#if defined(__x86_64__)
          if (vectorSteps > 0)
            codeWholeStepsVbmi(bf16Row(w, r), vectorSteps, codes, nullptr,
                               [&](int64_t) { ++count; });
#endif
          for (int64_t s = vectorSteps; s < steps; ++s)
            count += stepIsException(bf16Row(w, r), w.cols, s, codes) ? 1 : 0;
          perRow[r] = count;
        }
      },
      rowGrain(w));
  layout.exceptionBegin.assign(static_cast<size_t>(w.rows) + 1, 0);
  for (int64_t r = 0; r < w.rows; ++r)
    layout.exceptionBegin[r + 1] = layout.exceptionBegin[r] + perRow[r];
  layout.bytes = codedBf16Bytes(w.rows, w.cols, layout.exceptions());
  return layout;
}

bool codedBf16Pays(const WeightMatrix &w, const CodedBf16Layout &layout) {
  return layout.bytes * 5 <= static_cast<uint64_t>(w.rows * w.cols * 2) * 4;
}

CodedBf16 startCodedBf16(const WeightMatrix &w, const CodedBf16Layout &layout, uint8_t *out) {
  const CodedBf16Offsets o = codedOffsets(w.rows, w.cols, layout.exceptions());
  for (int q = 0; q < 4; ++q)
    std::memcpy(out + q * kCodedBf16Codes, layout.highBytes.data(), kCodedBf16Codes);
  std::memcpy(out + o.exceptionBegin, layout.exceptionBegin.data(),
              layout.exceptionBegin.size() * 4);
  return {out, out + o.steps, reinterpret_cast<const uint32_t *>(out + o.exceptionBegin),
          reinterpret_cast<const uint32_t *>(out + o.exceptionStep), out + o.exceptionHigh};
}

void codeBf16Rows(ThreadPool &pool, const WeightMatrix &w, const CodedBf16Layout &layout,
                  uint8_t *out, int64_t rowBegin, int64_t rowEnd) {
  const CodedBf16Offsets o = codedOffsets(w.rows, w.cols, layout.exceptions());
  const std::array<uint8_t, 256> codes = codesOf(layout.highBytes);
  const int64_t steps = codedBf16Steps(w.cols);
  auto *exceptionStep = reinterpret_cast<uint32_t *>(out + o.exceptionStep);
  uint8_t *exceptionHigh = out + o.exceptionHigh;
  pool.parallelFor(
      rowEnd - rowBegin,
      [&](int64_t begin, int64_t end) {
        const int64_t vectorSteps = vbmiSteps(w.cols);
        for (int64_t r = rowBegin + begin; r < rowBegin + end; ++r) {
          const uint16_t *row = bf16Row(w, r);
          uint8_t *rowSteps = out + o.steps + r * steps * kCodedBf16StepBytes;
          uint32_t e = layout.exceptionBegin[r];
          // Step s is an exception: its high bytes go beside, 0 past K.
          auto keepHighBytes = [&](int64_t s) {
            exceptionStep[e] = static_cast<uint32_t>(s);
            uint8_t *high = exceptionHigh + uint64_t{e} * kCodedBf16StepColumns;
            std::memset(high, 0, kCodedBf16StepColumns);
            for (int64_t c = s * kCodedBf16StepColumns;
                 c < std::min(w.cols, (s + 1) * kCodedBf16StepColumns); ++c)
              high[c - s * kCodedBf16StepColumns] = static_cast<uint8_t>(row[c] >> 8);
            ++e;
          };
#if defined(__x86_64__)
          if (vectorSteps > 0)
            codeWholeStepsVbmi(row, vectorSteps, codes, rowSteps, keepHighBytes);
#endif
          for (int64_t s = vectorSteps; s < steps; ++s)
            if (writeStep(row, w.cols, s, codes, rowSteps + s * kCodedBf16StepBytes))
              keepHighBytes(s);
        }
      },
      rowGrain(w));
}

CodedBf16 buildCodedBf16(ThreadPool &pool, const WeightMatrix &w, const CodedBf16Layout &layout,
                         uint8_t *out) {
  const CodedBf16 coded = startCodedBf16(w, layout, out);
  codeBf16Rows(pool, w, layout, out, 0, w.rows);
  return coded;
}

CodedBf16 codedBf16From(const CodedBf16 &coded, int64_t cols, int64_t first) {
  CodedBf16 rows = coded;
  rows.steps += first * codedBf16Steps(cols) * kCodedBf16StepBytes;
  rows.exceptionBegin += first;
  return rows;
}

uint16_t codedBf16Word(const CodedBf16 &coded, int64_t cols, int64_t row, int64_t col) {
  const int64_t s = col / kCodedBf16StepColumns, j = col % kCodedBf16StepColumns;
  const uint8_t *step = coded.steps + (row * codedBf16Steps(cols) + s) * kCodedBf16StepBytes;
  const uint16_t low = step[j];
  for (uint32_t e = coded.exceptionBegin[row]; e < coded.exceptionBegin[row + 1]; ++e)
    if (coded.exceptionStep[e] == static_cast<uint32_t>(s))
      return static_cast<uint16_t>(
          coded.exceptionHigh[uint64_t{e} * kCodedBf16StepColumns + j] << 8 | low);
  const int code = step[kCodedBf16StepColumns + j / 2] >> (4 * (j & 1)) & 0xf;
  return static_cast<uint16_t>(coded.table[code] << 8 | low);
}

} // namespace llmc::cpu
