// Attention over the paged KV cache; q, k, v may be column ranges of one
// packed qkv buffer, rotated on the fly when the step has RopeParams.
#include "cpu/attention.h"
#include "cpu/ops/op_context.h"

namespace llmc::cpu {

Status attentionStep(const OpContext &c) {
  const fb::AttentionParams &p = *c.step.params_as_AttentionParams();
  AttentionBatch batch;
  batch.q = c.in(0) + p.q_column();
  batch.ldq = c.inWidth(0);
  batch.k = c.in(1) + p.k_column();
  batch.ldk = c.inWidth(1);
  batch.v = c.in(2) + p.v_column();
  batch.ldv = c.inWidth(2);
  batch.out = c.out();
  batch.ldo = c.outWidth();
  batch.positions = c.input.positions;
  batch.sequences = c.sequences.data();
  batch.numSequences = static_cast<int64_t>(c.sequences.size());
  batch.heads = p.heads();
  batch.scale = static_cast<float>(p.scale());
  batch.ropeTable = p.rope() != nullptr ? c.ropeTable : nullptr;
  batch.scores.window = static_cast<hd::i32>(p.window());
  batch.scores.softcap = static_cast<float>(p.softcap());
  pagedAttention(c.pool, batch, c.cache.layer(static_cast<int32_t>(p.layer())));
  return Status::ok();
}

} // namespace llmc::cpu
