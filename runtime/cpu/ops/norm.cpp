// Norm: RMSNorm of each row (offset + gamma scaling, Gemma's 1 + w), or
// LayerNorm of each row or group of features (NormKind Layer).
#include "cpu/kernels.h"
#include "cpu/layer_norm.h"
#include "cpu/ops/op_context.h"

namespace llmc::cpu {

void applyNorm(const OpContext &c, const fb::NormParams &norm, int gammaWeight, const float *x,
               int64_t rows, float *y) {
  rmsNorm(c.pool, x, rows, c.vector(gammaWeight), static_cast<float>(norm.eps()), y,
          static_cast<float>(norm.offset()));
}

// With group_width g (per-head q/k norms), a [T, W] row is W / g rows of g
// (the validator checked that g divides W and that the weight has g entries).
Status normStep(const OpContext &c) {
  const fb::NormParams &norm = *c.step.params_as_NormParams();
  if (norm.kind() == fb::NormKind::Layer) {
    // LayerNorm: gamma (, beta) hold one value per feature or per feature of
    // a group (the validator checked which).
    const int64_t width = c.inWidth(0);
    const LayerNormShape shape{width, norm.group_width() > 0 ? norm.group_width() : width};
    const WeightVector beta = norm.bias() ? c.vector(1) : WeightVector{};
    layerNorm(c.pool, c.in(0), c.tokens(), shape, c.vector(0), beta,
              static_cast<float>(norm.eps()), c.out(), static_cast<float>(norm.offset()));
    return Status::ok();
  }
  const int64_t rows = norm.group_width() > 0
                           ? c.tokens() * (c.outWidth() / norm.group_width())
                           : c.tokens();
  applyNorm(c, norm, 0, c.in(0), rows, c.out());
  return Status::ok();
}

} // namespace llmc::cpu
