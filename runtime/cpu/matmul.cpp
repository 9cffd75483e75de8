#include "cpu/matmul.h"

#include "cpu/isa.h"
#include "cpu/simd.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

namespace llmc::cpu {
namespace {

// Decode: chunks of whole 4-row tiles, and at least ~64 KiB of weights each
// so that small layers do not pay for waking the pool.
void matmulDecode(ThreadPool &pool, const detail::MatmulProblem &problem,
                  const detail::IsaOps &ops) {
  const WeightMatrix &w = problem.w;
  const int64_t rowBytes = w.cols * static_cast<int64_t>(dtypeSize(w.dtype));
  int64_t grain = (64 * 1024 / (rowBytes * problem.tokens) + 3) / 4 * 4;
  pool.parallelFor(
      w.rows, [&](int64_t begin, int64_t end) { ops.matmulRows(problem, begin, end); },
      grain < 4 ? 4 : grain);
}

// Prefill: items of one block of rows by a span of whole token tiles. The
// tokens are split only when there are too few row blocks for every thread
// to take several. The row blocks are about equal, at most splitRowBlock
// rows, and as many as whole rounds of threads: 768 rows on 2 threads are 8
// blocks of 96, not 6 of 120 and one of 48 (4 items against 3, the second
// thread idle a quarter of the time).
void matmulPrefill(ThreadPool &pool, const detail::MatmulProblem &problem,
                   const detail::IsaOps &ops) {
  const int64_t rows = problem.w.rows, threads = pool.numThreads();
  const int64_t rounds =
      ((rows + ops.splitRowBlock - 1) / ops.splitRowBlock + threads - 1) / threads;
  // Whole 2- and 3-row tiles (the NEON and AVX2 GEMMs').
  const int64_t rowBlock = ((rows + rounds * threads - 1) / (rounds * threads) + 5) / 6 * 6;
  const int64_t rowBlocks = (rows + rowBlock - 1) / rowBlock;
  const int64_t tileCount = (problem.tokens + ops.splitTokenTile - 1) / ops.splitTokenTile;
  const int64_t wanted = 3 * static_cast<int64_t>(pool.numThreads());
  int64_t spans = 1;
  while (rowBlocks * spans < wanted && tileCount / (2 * spans) >= 8)
    spans *= 2;
  const int64_t spanTokens = (tileCount + spans - 1) / spans * ops.splitTokenTile;
  pool.parallelFor(rowBlocks * spans, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t row = item / spans * rowBlock, token = item % spans * spanTokens;
      ops.matmulBlock(problem, row, std::min(rows, row + rowBlock), token,
                      std::min(problem.tokens, token + spanTokens));
    }
  });
}

// A 64-byte aligned buffer of at least `floats` floats, the calling thread's.
float *tokenTileBuffer(int64_t floats) {
  thread_local std::vector<float> buffer;
  return detail::alignedFloats(buffer, floats);
}

} // namespace

namespace detail {
namespace {
std::atomic<int64_t> gForcedL2Budget{0};
} // namespace

int64_t gemmL2Budget() {
  static const int64_t machine = [] {
    const int64_t l2 = l2CacheBytes();
    return l2 <= 0 ? int64_t{256 * 1024} : std::clamp<int64_t>(l2 / 8 * 3, 256 * 1024, 1024 * 1024);
  }();
  const int64_t forced = gForcedL2Budget.load(std::memory_order_relaxed);
  return forced > 0 ? forced : machine;
}

void setGemmL2BudgetForTesting(int64_t bytes) {
  gForcedL2Budget.store(bytes, std::memory_order_relaxed);
}
} // namespace detail

const void *prefillTokenTiles(ThreadPool &pool, const float *x, int64_t tokens,
                              const WeightMatrix &w) {
  const detail::IsaOps &ops = detail::activeOps();
  if (ops.packedGemm == nullptr || ops.splitMinTokens <= 0 || tokens < ops.splitMinTokens)
    return nullptr;
  const int64_t k = w.cols;
  const int64_t tileCount = (tokens + detail::kGemmTileTokens - 1) / detail::kGemmTileTokens;
#if defined(__x86_64__)
  if (w.dtype == DType::BF16 && x86Bf16Active()) {
    const int64_t elements = detail::tokenTilesFloats(tokens, k, detail::kBf16DotColumns);
    auto *tiles = reinterpret_cast<uint16_t *>(tokenTileBuffer((elements + 1) / 2));
    pool.parallelFor(
        tileCount,
        [&](int64_t begin, int64_t end) {
          detail::packBf16TokenTiles(x, tokens, k, begin, end, tiles);
        },
        8);
    return tiles;
  }
#endif
  const int64_t columns = ops.gemmColumns;
  float *tiles = tokenTileBuffer(detail::tokenTilesFloats(tokens, k, columns));
  pool.parallelFor(
      tileCount,
      [&](int64_t begin, int64_t end) {
        detail::packTokenTiles(x, tokens, k, columns, begin, end, tiles);
      },
      8);
  return tiles;
}

void matmul(ThreadPool &pool, const float *x, int64_t tokens, const WeightMatrix &w,
            const float *bias, float beta, float *y) {
  if (tokens <= 0)
    return;
  const detail::MatmulProblem problem{x, tokens, w, bias, beta, y};
  const detail::IsaOps &ops = detail::activeOps();
  if (ops.splitMinTokens > 0 && tokens >= ops.splitMinTokens) {
    detail::MatmulProblem packed = problem;
    packed.xTiles = prefillTokenTiles(pool, x, tokens, w);
    matmulPrefill(pool, packed, ops);
  } else {
    matmulDecode(pool, problem, ops);
  }
}

} // namespace llmc::cpu
