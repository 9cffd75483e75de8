#include "cpu/layer_norm.h"

#include "cpu/simd.h"
#include "kernels/common/layer_norm.h"

#include <vector>

namespace llmc::cpu {
namespace {

// Elements per parallel task, as the element-wise kernels split their work.
constexpr int64_t kRowGrain = 1 << 14;

// gamma (+ offset) and beta as f32 [size]: beta zeros without a bias.
struct Affine {
  std::vector<float> scale, shift;
  Affine(const WeightVector &gamma, const WeightVector &beta, float offset)
      : scale(gamma.size), shift(gamma.size, 0.0f) {
    weightsToF32(gamma.data, gamma.dtype, 0, gamma.size, scale.data());
    for (float &s : scale)
      s += offset;
    if (beta.data != nullptr)
      weightsToF32(beta.data, beta.dtype, 0, beta.size, shift.data());
  }
};

// Normalizes one group of n features in place of out (out may be in): the
// sums run through the active ISA's dot product (ones . x, then d . d).
void normalizeGroup(const detail::IsaOps &ops, const float *in, float *out, int64_t n,
                    const float *ones, float eps, const float *scale, const float *shift) {
  const float mean = ops.dot(in, ones, n) / static_cast<float>(n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = in[i] - mean;
  const float inv = hd::layerNormInvStd(ops.dot(out, out, n), static_cast<int>(n), eps);
  for (int64_t i = 0; i < n; ++i)
    out[i] = hd::layerNormValue(out[i], inv, scale[i], shift[i]);
}

} // namespace

void layerNorm(ThreadPool &pool, const float *x, int64_t tokens, const LayerNormShape &shape,
               const WeightVector &gamma, const WeightVector &beta, float eps, float *y,
               float offset) {
  const int64_t width = shape.width, group = shape.groupWidth;
  const bool shared = gamma.size == group && group != width;
  const Affine affine(gamma, beta, offset);
  const std::vector<float> ones(group, 1.0f);
  const detail::IsaOps &ops = detail::activeOps();
  pool.parallelFor(
      tokens,
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t)
          for (int64_t g = 0; g < width; g += group) {
            const int64_t w = shared ? 0 : g;
            normalizeGroup(ops, x + t * width + g, y + t * width + g, group, ones.data(), eps,
                           affine.scale.data() + w, affine.shift.data() + w);
          }
      },
      kRowGrain / width + 1);
}

} // namespace llmc::cpu
