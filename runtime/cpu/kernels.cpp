#include "cpu/kernels.h"

#include "cpu/activation_rows.h"
#include "cpu/simd.h"
#include "kernels/common/activations.h"
#include "kernels/common/attention_scores.h"

#include <cmath>
#include <string>
#include <vector>

namespace llmc::cpu {
namespace {

// Element-wise kernels split into chunks of this many elements.
constexpr int64_t kElementGrain = 16 * 1024;

} // namespace

void add(ThreadPool &pool, const float *a, const float *b, float *y, int64_t n) {
  pool.parallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          y[i] = a[i] + b[i];
      },
      kElementGrain);
}

void mul(ThreadPool &pool, const float *a, const float *b, float *y, int64_t n) {
  pool.parallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          y[i] = a[i] * b[i];
      },
      kElementGrain);
}

void silu(ThreadPool &pool, const float *x, float *y, int64_t n) {
  pool.parallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        siluRow(x + begin, y + begin, end - begin);
      },
      kElementGrain);
}

void gelu(ThreadPool &pool, const float *x, float *y, int64_t n, bool tanh) {
  pool.parallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          y[i] = tanh ? hd::geluTanh(x[i]) : hd::geluErf(x[i]);
      },
      kElementGrain);
}

void swiglu(ThreadPool &pool, const float *gate, const float *up, float *y, int64_t n,
            int gateKind) {
  pool.parallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        gatedRow(gateKind, gate + begin, up + begin, y + begin, end - begin);
      },
      kElementGrain);
}

void softCap(ThreadPool &pool, float *x, int64_t n, float cap) {
  pool.parallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          x[i] = hd::softCap(x[i], cap);
      },
      kElementGrain);
}

void scale(ThreadPool &pool, float *x, int64_t n, float factor) {
  pool.parallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          x[i] *= factor;
      },
      kElementGrain);
}

void swigluFused(ThreadPool &pool, const float *gateUp, int64_t tokens, int64_t inter, float *y) {
  pool.parallelFor(
      tokens,
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const float *gate = gateUp + t * 2 * inter;
          const float *up = gate + inter;
          float *out = y + t * inter;
          gatedRow(hd::kGateSilu, gate, up, out, inter);
        }
      },
      kElementGrain / inter + 1);
}

void rmsNorm(ThreadPool &pool, const float *x, int64_t tokens, const WeightVector &w, float eps,
             float *y, float offset) {
  const int64_t hidden = w.size;
  const detail::IsaOps &ops = detail::activeOps();
  pool.parallelFor(
      tokens,
      [&](int64_t begin, int64_t end) {
        thread_local std::vector<float> scale;
        if (static_cast<int64_t>(scale.size()) < hidden)
          scale.resize(hidden);
        weightsToF32(w.data, w.dtype, 0, hidden, scale.data());
        if (offset != 0.0f)
          for (int64_t i = 0; i < hidden; ++i)
            scale[i] += offset;
        for (int64_t t = begin; t < end; ++t) {
          const float *in = x + t * hidden;
          float *out = y + t * hidden;
          float meanSquare = ops.dot(in, in, hidden) / static_cast<float>(hidden);
          float inv = 1.0f / std::sqrt(meanSquare + eps);
          for (int64_t i = 0; i < hidden; ++i)
            out[i] = in[i] * inv * scale[i];
        }
      },
      kElementGrain / hidden + 1);
}

Status embedding(ThreadPool &pool, const WeightMatrix &table, const int32_t *ids, int64_t tokens,
                 float *y) {
  for (int64_t t = 0; t < tokens; ++t)
    if (ids[t] < 0 || ids[t] >= table.rows)
      return Status::error("embedding: token id " + std::to_string(ids[t]) + " at position " +
                           std::to_string(t) + " is outside the vocabulary [0, " +
                           std::to_string(table.rows) + ")");
  const int64_t hidden = table.cols;
  pool.parallelFor(
      tokens,
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t)
          weightsToF32(table.data, table.dtype, ids[t] * hidden, hidden, y + t * hidden);
      },
      kElementGrain / hidden + 1);
  return Status::ok();
}

void argmax(const float *x, int64_t rows, int64_t cols, int32_t *out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x + r * cols;
    int64_t best = 0;
    float bestValue = -INFINITY;
    for (int64_t i = 0; i < cols; ++i)
      if (row[i] > bestValue) {
        bestValue = row[i];
        best = i;
      }
    out[r] = static_cast<int32_t>(best);
  }
}

void ropeInvFreqs(int rotaryDim, float theta, const hd::RopeScaling &scaling, float *invFreq) {
  for (int i = 0; i < rotaryDim / 2; ++i)
    invFreq[i] = hd::ropeInvFreq(i, rotaryDim, theta, scaling);
}

std::vector<float> ropeTable(int64_t positions, int rotaryDim, const float *invFreq,
                             float attentionFactor) {
  const int64_t half = rotaryDim / 2;
  std::vector<float> table(positions * rotaryDim);
  for (int64_t p = 0; p < positions; ++p) {
    float *row = table.data() + p * rotaryDim;
    for (int64_t i = 0; i < half; ++i)
      hd::ropeCosSin(static_cast<int>(p), invFreq[i], attentionFactor, row[i], row[half + i]);
  }
  return table;
}

void rope(ThreadPool &pool, float *x, int64_t tokens, int64_t ldx, const RopeShape &shape,
          const int32_t *positions, const float *table) {
  const int64_t half = shape.rotaryDim / 2;
  pool.parallelFor(
      tokens,
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const float *cosSin = table + positions[t] * shape.rotaryDim;
          for (int64_t h = 0; h < shape.heads; ++h) {
            float *head = x + t * ldx + h * shape.headDim;
            for (int64_t i = 0; i < half; ++i) {
              int first, second;
              hd::ropePairFeatures(static_cast<int>(i), static_cast<int>(shape.rotaryDim),
                                   shape.interleaved, first, second);
              hd::ropeRotate(head[first], head[second], cosSin[i], cosSin[half + i]);
            }
          }
        }
      },
      8);
}

} // namespace llmc::cpu
