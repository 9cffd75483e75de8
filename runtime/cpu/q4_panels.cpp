#include "cpu/q4_panels.h"

#include "cpu/isa.h"
#include "kernels/common/q4_layout.h"
#include "support/align.h"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace llmc::cpu {
namespace {

constexpr int64_t kWordsPerPair = 8;

// Panel b of w into out (shape.stride bytes).
void buildPanel(const Q4Matrix &w, const Q4PanelShape &shape, int64_t b, uint8_t *out) {
  std::memset(out, 0, static_cast<size_t>(shape.stride));
  uint8_t *zeros = out + shape.zerosOffset;
  const int64_t zeroRowBytes = q4ZeroRowBytes(shape.groups);
  const int64_t rows = std::min(kQ4PanelRows, w.rows - b * kQ4PanelRows);
  const uint32_t *firstRow = w.qweight + b * kQ4PanelRows * shape.words;
  for (int64_t q = 0; q < shape.pairs; ++q) { // each pair's place found once
    uint8_t *pair = out + q4PanelWordsOffset(shape, q);
    const int64_t pairWords = std::min(kWordsPerPair, shape.words - q * kWordsPerPair);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t l = 0; l < pairWords; ++l)
        std::memcpy(pair + (l * kQ4PanelRows + r) * 4,
                    firstRow + r * shape.words + q * kWordsPerPair + l, 4);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = b * kQ4PanelRows + r;
    const uint16_t *rowScales = w.scales + n * shape.groups;
    const uint8_t *rowZeros = w.zeros + n * zeroRowBytes;
    for (int64_t g = 0; g < shape.groups; ++g) {
      std::memcpy(out + q4PanelScalesOffset(shape, g) + r * 2, rowScales + g, 2);
      zeros[(g / 2) * kQ4PanelRows + r] |=
          static_cast<uint8_t>(q4ZeroAt(rowZeros, g) << (4 * (g % 2)));
    }
  }
}

} // namespace

Q4PanelShape q4PanelShape(int64_t cols, int64_t groupSize) {
  Q4PanelShape shape;
  shape.words = hd::q4WordsPerRow(cols);
  shape.pairs = (shape.words + kWordsPerPair - 1) / kWordsPerPair;
  shape.groups = hd::q4NumGroups(cols, groupSize);
  shape.pairsPerUnit = groupSize / hd::kQ4ColumnsPerLoad; // G is a multiple of 32
  const int64_t units = (shape.groups + 1) / 2;
  shape.zerosOffset = shape.pairs * kQ4PanelPairBytes + units * kQ4PanelUnitBytes;
  shape.stride = static_cast<int64_t>(
      alignUp(static_cast<uint64_t>(shape.zerosOffset + units * kQ4PanelRows), 64));
  return shape;
}

bool q4PanelsUsed() {
#if defined(__x86_64__)
  return x86VnniActive();
#else
  return false;
#endif
}

namespace {

std::atomic<int64_t> &panelMaxCols() {
  static std::atomic<int64_t> cols{kQ4PanelMaxCols};
  return cols;
}

} // namespace

bool q4PanelsFor(int64_t cols) {
  return q4PanelsUsed() && cols <= panelMaxCols().load(std::memory_order_relaxed);
}

void setQ4PanelMaxColsForTesting(int64_t cols) {
  panelMaxCols().store(cols, std::memory_order_relaxed);
}

void buildQ4Panels(ThreadPool &pool, const Q4Matrix &w, uint8_t *out) {
  const Q4PanelShape shape = q4PanelShape(w.cols, w.groupSize);
  pool.parallelFor(
      q4PanelCount(w.rows),
      [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b)
          buildPanel(w, shape, b, out + b * shape.stride);
      },
      std::max<int64_t>(1, (1 << 18) / shape.stride));
}

} // namespace llmc::cpu
