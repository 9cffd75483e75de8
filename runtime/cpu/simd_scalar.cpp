// Portable kernels: the reference path and the fallback for CPUs without AVX2.
#include "cpu/simd.h"

#include <vector>

namespace llmc::cpu::detail {
namespace {

float dotScalar(const float *a, const float *b, int64_t n) {
  // Four partial sums: fewer dependent adds, same order on every CPU.
  float s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int j = 0; j < 4; ++j)
      s[j] += a[i + j] * b[i + j];
  for (; i < n; ++i)
    s[0] += a[i] * b[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

void axpyScalar(float a, const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] += a * x[i];
}

void scaleScalar(float a, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] *= a;
}

// Converts each weight row to f32 once, then dots it with every token.
void matmulBlockScalar(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd, int64_t tokenBegin,
                       int64_t tokenEnd) {
  const int64_t k = p.w.cols;
  thread_local std::vector<float> row;
  if (static_cast<int64_t>(row.size()) < k)
    row.resize(k);
  for (int64_t n = rowBegin; n < rowEnd; ++n) {
    weightsToF32(p.w.data, p.w.dtype, n * k, k, row.data());
    for (int64_t t = tokenBegin; t < tokenEnd; ++t)
      storeOutput(p, t, n, dotScalar(p.x + t * k, row.data(), k));
  }
}

void matmulRowsScalar(const MatmulProblem &p, int64_t rowBegin, int64_t rowEnd) {
  matmulBlockScalar(p, rowBegin, rowEnd, 0, p.tokens);
}

} // namespace

const IsaOps kScalarOps = {matmulRowsScalar, matmulBlockScalar, nullptr,    0, 1, 1, 0,
                           dotScalar,        axpyScalar,        scaleScalar};

const IsaOps &activeOps() {
  switch (activeIsa()) {
  case Isa::Scalar:
    return kScalarOps;
  case Isa::Avx2:
#if defined(__x86_64__)
    return kAvx2Ops;
#else
    return kScalarOps;
#endif
  case Isa::Avx512:
#if defined(__x86_64__)
    return kAvx512Ops;
#else
    return kScalarOps;
#endif
  case Isa::Neon:
#if defined(__aarch64__)
    return kNeonOps;
#else
    return kScalarOps;
#endif
  }
  return kScalarOps;
}

} // namespace llmc::cpu::detail
