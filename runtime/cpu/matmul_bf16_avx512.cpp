// bf16 weights by vdpbf16ps (AVX512-BF16; cpu::x86Bf16Active): x rounded to
// bf16 (round to nearest even), each instruction adding to every f32 lane j
// the products of elements 2j and 2j + 1 of 32 bf16 weights and 32 bf16
// inputs. A bf16 product is exact in f32, so what changes against the f32
// FMA kernels (simd_avx512.cpp) is x's rounding: about 2^-9 relative per
// input, as llama.cpp and oneDNN take on these CPUs. In exchange an
// instruction does 32 multiply-adds, not 16, on weights read as they are
// stored (no widening): prefill runs up to twice the f32 FMA peak.
//
// Numerics, every path (decode runs, small tiles, the prefill GEMM): lane j
// of one accumulator adds, step by step over 32-column steps from column 0,
// vdpbf16ps(w[32s + 2j .. + 1], x[32s + 2j .. + 1]); the K % 32 tail is one
// more step with zeros past K (masked loads, or the panel's zero padding);
// then _mm512_reduce_add_ps's tree (reduceAdd16) and storeOutput. So an
// output has the same bits whatever the token count, tile or thread split.
//
// Every path reads a matrix's coded rows instead where the loader made them
// (WeightMatrix::coded, cpu/bf16_coded.h: 12 bits a weight, AVX512-VBMI):
// the decode tiles (under 32 tokens) rebuild the same words, so the same
// bits, from three quarters of the bytes, and the prefill GEMM rebuilds
// them into its panels.
#if defined(__x86_64__)

#include "cpu/bf16_coded.h"
#include "cpu/isa.h"
#include "cpu/simd.h"
#include "cpu/simd_avx512.h"
#include "cpu/simd_gemm.h"

#include <immintrin.h>

#include <vector>

#define LLMC_AVX512_BF16                                                                           \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c")))

namespace llmc::cpu::detail {
namespace {

constexpr int64_t kColumns = kBf16DotColumns; // bf16 elements per 512-bit step

// Lanes [0, n) of 16 (n may be <= 0 or >= 16).
LLMC_AVX512_BF16 inline __mmask16 firstLanes16(int64_t n) {
  return n >= 16  ? static_cast<__mmask16>(0xffff)
         : n <= 0 ? static_cast<__mmask16>(0)
                  : static_cast<__mmask16>((1u << n) - 1);
}

// Elements [0, n) of 32 16-bit ones, 0 < n <= 32.
LLMC_AVX512_BF16 inline __mmask32 firstElements32(int64_t n) {
  return n >= 32 ? static_cast<__mmask32>(0xffffffffu) : static_cast<__mmask32>((1u << n) - 1);
}

// x[0 .. 32) rounded to bf16, element i at i.
LLMC_AVX512_BF16 inline __m512i roundedStep(const float *x) {
  // _mm512_cvtne2ps_pbh(a, b): elements 0-15 from b, 16-31 from a.
  return reinterpret_cast<__m512i>(
      _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x)));
}

// x[0 .. n) rounded to bf16, zeros past n (0 < n <= 32): a K % 32 tail.
LLMC_AVX512_BF16 inline __m512i roundedTail(const float *x, int64_t n) {
  return reinterpret_cast<__m512i>(
      _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(firstLanes16(n - 16), x + 16),
                          _mm512_maskz_loadu_ps(firstLanes16(n), x)));
}

LLMC_AVX512_BF16 inline __m512 dotStep(__m512 acc, __m512i w, __m512i x) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(w), reinterpret_cast<__m512bh>(x));
}

// x[tokens, k] rounded to bf16 into rows of `stride` (k rounded up to 32)
// elements, zeros past k: what the decode tiles read.
LLMC_AVX512_BF16 void roundRows(const float *x, int64_t tokens, int64_t k, int64_t stride,
                                uint16_t *out) {
  for (int64_t t = 0; t < tokens; ++t) {
    const float *row = x + t * k;
    uint16_t *dst = out + t * stride;
    int64_t i = 0;
    for (; i + kColumns <= k; i += kColumns)
      _mm512_storeu_si512(dst + i, roundedStep(row + i));
    if (i < k)
      _mm512_storeu_si512(dst + i, roundedTail(row + i, k - i));
  }
}

// y[t0 .. t0+TT, n0 .. n0+R]: R weight rows against TT tokens of xb (rows of
// `stride` bf16, zero padded to a multiple of 32), R*TT accumulators; Rows
// gives row r's 32 bf16 weights of each step. Row r of the tile is output
// row n0 + r * rowStep. Ahead > 0: each row's stream is prefetched Ahead
// bytes in front of its loads.
template <class Rows, int R, int TT, int Ahead>
LLMC_AVX512_BF16 inline void dotTile(const MatmulProblem &p, Rows &rows, const uint16_t *xb,
                                     int64_t stride, int64_t n0, int64_t t0, int64_t rowStep) {
  const int64_t k = p.w.cols, full = k / kColumns;
  const uint16_t *x = xb + t0 * stride;
  __m512 acc[R][TT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t)
      acc[r][t] = _mm512_setzero_ps();
  for (int64_t s = 0; s < full; ++s) { // one step of each row
    if constexpr (Ahead > 0)
      for (int r = 0; r < R; ++r)
        _mm_prefetch(rows.stepAddress(r, s) + Ahead, _MM_HINT_T0);
    __m512i xv[TT];
    for (int t = 0; t < TT; ++t)
      xv[t] = _mm512_loadu_si512(x + t * stride + s * kColumns);
    for (int r = 0; r < R; ++r) {
      const __m512i wv = rows.step(r, s);
      for (int t = 0; t < TT; ++t)
        acc[r][t] = dotStep(acc[r][t], wv, xv[t]);
    }
  }
  if (full * kColumns < k) { // the K % 32 tail, zeros past K
    const __mmask32 mask = firstElements32(k - full * kColumns);
    for (int r = 0; r < R; ++r) {
      const __m512i wv = rows.tail(r, full, mask);
      for (int t = 0; t < TT; ++t)
        acc[r][t] = dotStep(acc[r][t], wv, _mm512_loadu_si512(x + t * stride + full * kColumns));
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < TT; ++t)
      storeOutput(p, t0 + t, n0 + r * rowStep, _mm512_reduce_add_ps(acc[r][t]));
}

// The plain rows: bf16 as the plan stores them.
struct PlainRows {
  const char *first; // row n0's bytes
  int64_t rowBytes;  // from one tile row to the next
  PlainRows(const MatmulProblem &p, int64_t n0, int64_t rowStep)
      : first(static_cast<const char *>(p.w.data) + n0 * p.w.cols * 2),
        rowBytes(rowStep * p.w.cols * 2) {}
  const char *stepAddress(int r, int64_t s) const {
    return first + r * rowBytes + 2 * kColumns * s;
  }
  LLMC_AVX512_BF16 __m512i step(int r, int64_t s) const {
    return _mm512_loadu_si512(stepAddress(r, s));
  }
  // The K % 32 tail: reads nothing past the row.
  LLMC_AVX512_BF16 __m512i tail(int r, int64_t s, __mmask32 mask) const {
    return _mm512_maskz_loadu_epi16(mask, stepAddress(r, s));
  }
};

// One tile over plain rows.
struct PlainTile {
  static int64_t rowBytes(const MatmulProblem &p) { return p.w.cols * 2; }
  template <int R, int TT, int Ahead = 0>
  LLMC_AVX512_BF16 static void run(const MatmulProblem &p, const uint16_t *xb, int64_t stride,
                                   int64_t n0, int64_t t0, int64_t rowStep = 1) {
    PlainRows rows(p, n0, rowStep);
    dotTile<PlainRows, R, TT, Ahead>(p, rows, xb, stride, n0, t0, rowStep);
  }
};

#define LLMC_AVX512_BF16_VBMI                                                                      \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512vbmi,avx2,fma,f16c")))

// The coded rows (cpu/bf16_coded.h): each step's words rebuilt from its low
// bytes and its codes' high bytes, or, at a row's exceptions, its stored
// high bytes. The words are the plain rows', so the sums are too.
template <int R> struct CodedRows {
  const uint8_t *row[R];
  const uint32_t *exceptionStep;
  const uint8_t *exceptionHigh;
  uint32_t exception[R], exceptionEnd[R];
  int64_t nextException[R]; // the step of row r's next exception, or -1
  __m512i table;

  LLMC_AVX512_BF16_VBMI CodedRows(const MatmulProblem &p, int64_t n0, int64_t rowStep)
      : exceptionStep(p.w.coded.exceptionStep), exceptionHigh(p.w.coded.exceptionHigh),
        table(_mm512_loadu_si512(p.w.coded.table)) {
    const int64_t rowBytes = codedBf16Steps(p.w.cols) * kCodedBf16StepBytes;
    for (int r = 0; r < R; ++r) {
      const int64_t n = n0 + r * rowStep;
      row[r] = p.w.coded.steps + n * rowBytes;
      exception[r] = p.w.coded.exceptionBegin[n];
      exceptionEnd[r] = p.w.coded.exceptionBegin[n + 1];
      nextException[r] = exception[r] < exceptionEnd[r] ? exceptionStep[exception[r]] : -1;
    }
  }
  const char *stepAddress(int r, int64_t s) const {
    return reinterpret_cast<const char *>(row[r] + s * kCodedBf16StepBytes);
  }
  LLMC_AVX512_BF16_VBMI __m512i step(int r, int64_t s) {
    const uint8_t *at = row[r] + s * kCodedBf16StepBytes;
    // Word j's low byte from byte j.
    const __m512i low =
        _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(at)));
    if (s == nextException[r]) [[unlikely]]
      return exactStep(r, low);
    // Qword q of `codes` holds the 4 codes of words 4q .. 4q + 3 in bits
    // 0..15; byte 2m + 1 of the shifted qword takes its bits 4m .. 4m + 7,
    // code m in the low nibble (the table repeats every 16 bytes, so the
    // bits above do not matter), and vpermb puts the table's byte there:
    // word m's high byte.
    const __m512i codes = _mm512_cvtepu16_epi64(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(at + kCodedBf16StepColumns)));
    const __m512i shifts = _mm512_set1_epi64(0x0c00080004000000);
    return _mm512_mask_permutexvar_epi8(low, static_cast<__mmask64>(0xaaaaaaaaaaaaaaaaull),
                                        _mm512_multishift_epi64_epi8(shifts, codes), table);
  }
  // Row r read from step s on (a depth chunk of the GEMM): its exceptions
  // before s passed over.
  void skipTo(int r, int64_t s) {
    while (nextException[r] >= 0 && nextException[r] < s) {
      ++exception[r];
      nextException[r] = exception[r] < exceptionEnd[r] ? exceptionStep[exception[r]] : -1;
    }
  }
  // The K % 32 tail (stored whole, zeros past K).
  LLMC_AVX512_BF16_VBMI __m512i tail(int r, int64_t s, __mmask32 mask) {
    return _mm512_maskz_mov_epi16(mask, step(r, s));
  }
  // The step of row r's next exception, its high bytes stored whole.
  LLMC_AVX512_BF16_VBMI __m512i exactStep(int r, __m512i low) {
    const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(
        exceptionHigh + uint64_t{exception[r]} * kCodedBf16StepColumns));
    ++exception[r];
    nextException[r] = exception[r] < exceptionEnd[r] ? exceptionStep[exception[r]] : -1;
    return _mm512_or_si512(low, _mm512_slli_epi16(_mm512_cvtepu8_epi16(high), 8));
  }
};

// Whether the kernels read p's coded rows: where the loader made them
// (codedBf16Used: VBMI), or a test did on a CPU with VBMI.
inline bool readsCodedRows(const MatmulProblem &p) {
  return p.w.coded.table != nullptr && x86VbmiSupported();
}

// One tile over coded rows.
struct CodedTile {
  static int64_t rowBytes(const MatmulProblem &p) {
    return codedBf16Steps(p.w.cols) * kCodedBf16StepBytes;
  }
  template <int R, int TT, int Ahead = 0>
  LLMC_AVX512_BF16_VBMI static void run(const MatmulProblem &p, const uint16_t *xb, int64_t stride,
                                        int64_t n0, int64_t t0, int64_t rowStep = 1) {
    CodedRows<R> rows(p, n0, rowStep);
    dotTile<CodedRows<R>, R, TT, Ahead>(p, rows, xb, stride, n0, t0, rowStep);
  }
};

// Decode (1 or TT = 2 tokens): rows [rowBegin, rowEnd) in 4 equal runs, tile
// j taking row j of each run, each run one sequential stream (as
// simd_avx512.cpp streamedRows, which measured why).
template <class Tile, int TT>
LLMC_AVX512_BF16 void streamedRows(const MatmulProblem &p, const uint16_t *xb, int64_t stride,
                                   int64_t rowBegin, int64_t rowEnd) {
  constexpr int kStreams = 4, kAhead = 256;
  const int64_t run = (rowEnd - rowBegin) / kStreams;
  for (int64_t j = 0; j < run; ++j)
    Tile::template run<kStreams, TT, kAhead>(p, xb, stride, rowBegin + j, 0, run);
  for (int64_t n = rowBegin + kStreams * run; n < rowEnd; ++n)
    Tile::template run<1, TT>(p, xb, stride, n, 0);
}

// A tile of R rows by min(tokens, TT) tokens.
template <class Tile, int R, int TT>
LLMC_AVX512_BF16 void tileUpTo(const MatmulProblem &p, const uint16_t *xb, int64_t stride,
                               int64_t n0, int64_t t0, int64_t tokens) {
  if constexpr (TT > 1)
    if (tokens < TT)
      return tileUpTo<Tile, R, TT - 1>(p, xb, stride, n0, t0, tokens);
  Tile::template run<R, TT>(p, xb, stride, n0, t0);
}

// The prefill GEMM's kernel (simd_gemm.h) for bf16 weights: panels of the
// weights' own bf16 (copied, not converted), token tiles of x rounded to
// bf16, 32 columns a step. 6 rows x 4 tokens, 24 accumulators, 6 weight
// vectors and one x vector of the 32 zmm registers; a step is 6 panel loads,
// 4 token loads and 24 vdpbf16ps (768 multiply-adds). The sums are dotTile's.
struct Bf16DotGemm {
  using Element = uint16_t;
  static constexpr int kRows = 6, kTokens = 4, kColumns = 32;

  template <DType D>
  LLMC_AVX512_BF16 static void convert(const char *row, int64_t k, uint16_t *out) {
    static_assert(D == DType::BF16, "the bf16 dot-product GEMM takes bf16 weights only");
    int64_t i = 0;
    for (; i + kColumns <= k; i += kColumns)
      _mm512_store_si512(out + i * kRows, _mm512_loadu_si512(row + 2 * i));
    if (i < k)
      _mm512_store_si512(out + i * kRows,
                         _mm512_maskz_loadu_epi16(firstElements32(k - i), row + 2 * i));
  }

  // Coded rows (cpu/bf16_coded.h) where the loader made them: the panels
  // get the words the plain rows hold, so the same bits.
  static bool codedRows(const MatmulProblem &p) { return readsCodedRows(p); }
  LLMC_AVX512_BF16_VBMI static void convertCoded(const MatmulProblem &p, int64_t n, int64_t k0,
                                                 int64_t width, uint16_t *out) {
    CodedRows<1> rows(p, n, 1);
    const int64_t first = k0 / kColumns, end = k0 + width;
    rows.skipTo(0, first);
    // Whole steps, then the row's tail with zeros past K (as convert's).
    for (int64_t s = first; s * kColumns < end; ++s)
      _mm512_store_si512(out + (s - first) * kRows * kColumns,
                         (s + 1) * kColumns > end
                             ? rows.tail(0, s, firstElements32(end - s * kColumns))
                             : rows.step(0, s));
  }

  template <int R, int TT, bool PackTokens>
  LLMC_AVX512_BF16 static void tile(const MatmulProblem &p, const uint16_t *panel, uint16_t *xs,
                                    int64_t n0, int64_t t0, int64_t kBegin, int64_t kEnd,
                                    float *carry) {
    const int64_t k = p.w.cols, steps = (kEnd - kBegin) / kColumns;
    __m512 acc[R][TT];
    startLanes(acc, carry, kBegin == 0);
    const uint16_t *w = panel;
    const float *x = p.x + t0 * k + kBegin;
    uint16_t *xv = xs;
    for (int64_t s = 0; s < steps;
         ++s, w += kRows * kColumns, x += kColumns, xv += kTokens * kColumns) {
      __m512i wv[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
        wv[r] = _mm512_load_si512(w + r * kColumns);
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t) {
        const __m512i x32 =
            PackTokens ? roundedStep(x + t * k) : _mm512_load_si512(xv + t * kColumns);
        if constexpr (PackTokens)
          _mm512_store_si512(xv + t * kColumns, x32);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
          acc[r][t] = dotStep(acc[r][t], wv[r], x32);
      }
    }
    if (kEnd < k)
      return carryLanes(acc, carry);
    if (const int64_t tail = k - (kBegin + steps * kColumns); tail > 0) {
#pragma GCC unroll 16
      for (int t = 0; t < TT; ++t) {
        const __m512i x32 = roundedTail(x + t * k, tail);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
          acc[r][t] = dotStep(acc[r][t], _mm512_load_si512(w + r * kColumns), x32);
      }
    }
    storeTile<R, TT>(p, acc, n0, t0);
  }
};

// A token tile's step for packTokenTileSteps: 32 columns rounded to bf16.
struct RoundStep {
  LLMC_AVX512_BF16 void operator()(const float *from, uint16_t *to) const {
    _mm512_store_si512(to, roundedStep(from));
  }
};

// From this many tokens on, a problem goes through the GEMM (as the f32 kernels).
constexpr int64_t kGemmTokens = 32;

// x rounded to bf16 for the decode tiles: the calling thread's buffer.
uint16_t *decodeInputs(const MatmulProblem &p, int64_t stride) {
  thread_local std::vector<uint16_t> buffer;
  const size_t needed = static_cast<size_t>(p.tokens * stride);
  if (buffer.size() < needed)
    buffer.resize(needed);
  roundRows(p.x, p.tokens, p.w.cols, stride, buffer.data());
  return buffer.data();
}

// Decode and small batches (under kGemmTokens tokens) over Tile's rows.
template <class Tile>
LLMC_AVX512_BF16 void decodeRows(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd) {
  const int64_t stride = (p.w.cols + kColumns - 1) / kColumns * kColumns;
  const uint16_t *xb = decodeInputs(p, stride);
  if (p.tokens == 2)
    return streamedRows<Tile, 2>(p, xb, stride, rowBegin, rowEnd);
  if (p.tokens == 1)
    return streamedRows<Tile, 1>(p, xb, stride, rowBegin, rowEnd);
  // 3-31 tokens: tiles of 4 rows x 4 tokens over L2-resident blocks of rows.
  constexpr int kRows = 4, kTokens = 4;
  const int64_t block = rowsPerL2Block(Tile::rowBytes(p), kRows);
  for (int64_t b = rowBegin; b < rowEnd; b += block) {
    const int64_t bEnd = b + block < rowEnd ? b + block : rowEnd;
    for (int64_t t0 = 0; t0 < p.tokens; t0 += kTokens) {
      int64_t n = b;
      for (; n + kRows <= bEnd; n += kRows)
        tileUpTo<Tile, kRows, kTokens>(p, xb, stride, n, t0, p.tokens - t0);
      for (; n < bEnd; ++n)
        tileUpTo<Tile, 1, kTokens>(p, xb, stride, n, t0, p.tokens - t0);
    }
  }
}

} // namespace

void matmulRowsBf16Dot(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd) {
  if (p.tokens >= kGemmTokens)
    return packedGemm<Bf16DotGemm, DType::BF16>(p, rowBegin, rowEnd, 0, p.tokens);
  if (readsCodedRows(p))
    return decodeRows<CodedTile>(p, rowBegin, rowEnd);
  decodeRows<PlainTile>(p, rowBegin, rowEnd);
}

void packedGemmBf16Dot(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd, int64_t tokenBegin,
                       int64_t tokenEnd) {
  packedGemm<Bf16DotGemm, DType::BF16>(p, rowBegin, rowEnd, tokenBegin, tokenEnd);
}

void packBf16TokenTiles(const float *x, int64_t tokens, int64_t k, int64_t tileBegin,
                        int64_t tileEnd, uint16_t *out) {
  packTokenTileSteps(x, tokens, k, kColumns, tileBegin, tileEnd, out, RoundStep{});
}

} // namespace llmc::cpu::detail

#endif // __x86_64__
