// Paged attention over the KV cache (attention.cuh): flash-decoding for
// decode programs (splits of the context per KV head), tiled prefill (query
// rows of a GQA group share each K/V chunk); sliding window and soft-capping.
#include "cuda/ops/ops.h"

#include <algorithm>

namespace llmc::cuda::ops {

// Attention (q, k, v from columns of possibly packed buffers; with
// RopeParams, RoPE on the fly).
Expected<KernelInstance> attentionKernel(const StepView &v) {
  DType a = v.dtype(v.output());
  for (int i = 0; i < 3; ++i)
    if (v.dtype(v.input(i)) != a)
      return unsupported(v, "q, k, v and the output must share one dtype");
  const fb::AttentionParamsT &p = *v.step.params.AsAttentionParams();
  int64_t heads = p.heads, kvHeads = p.kv_heads, dim = p.head_dim;
  int64_t qCol = p.q_column, kCol = p.k_column, vCol = p.v_column;
  bool rope = p.rope != nullptr;
  // Column-reading or rotating attention (what fusion makes) names its columns.
  bool fused = rope || qCol != 0 || kCol != 0 || vCol != 0;
  int64_t qStride = v.input(0).width, kStride = v.input(1).width, vStride = v.input(2).width;
  int64_t group = heads / kvHeads;
  int64_t blockSize = v.plan.kv_cache->block_size;
  int64_t maxSeq = v.plan.model->max_seq_len;
  float scale = static_cast<float>(p.scale);
  // Sliding window and soft-capping (kernels/common/attention_scores.h), 0: off.
  int64_t window = p.window;
  float softcap = static_cast<float>(p.softcap);
  const int warps = 4, chunk = 32;
  int vec = vectorWidth(dim, {dtypeSize(a)});
  for (int64_t x : {qStride, kStride, vStride, qCol, kCol, vCol})
    while (vec > 1 && x % vec != 0)
      vec /= 2;
  // Prefill tiles of rows share each K/V chunk: 32 query vectors per block.
  int64_t rowsPerBlock = v.shape.decode ? 1 : std::max<int64_t>(1, 32 / group);
  // Decode: the grid has room for `splits` splits per KV head, enough for
  // the heads to cover the SMs twice (32 for 8 KV heads); how many work,
  // and on how many positions each, the kernel decides from the context
  // (hd::decodeSplits), so short contexts spread too and max_seq does not
  // fix the split length.
  int64_t splits = 1;
  if (v.shape.decode) {
    int64_t wanted = std::max<int64_t>(1, 2 * kSmCount / kvHeads);
    while (splits * 2 <= std::min<int64_t>(wanted, 64))
      splits *= 2;
    splits = std::min(splits, ceilDiv(maxSeq, chunk));
  }
  uint64_t sharedFloats = chunk * (dim + 1) + chunk * dim + rowsPerBlock * group * dim;
  std::string spec, hashTag;
  if (rope) {
    LLMC_ASSIGN_OR_RETURN(spec, ropeSpec(v, *p.rope, dim, "RopeSpec", &hashTag));
  }
  KernelInstance k;
  k.name = "llmc_attention_" + std::string(v.shape.decode ? "decode_" : "prefill_") + tag(a) +
           "_d" + str(dim) + "_g" + str(group) + "_kv" + str(kvHeads) + "_bs" + str(blockSize) +
           "_bm" + str(rowsPerBlock) +
           (splits > 1 ? "_s" + str(splits) : "") + "_sc" + floatTag(scale) +
           (window > 0 ? "_w" + str(window) : "") +
           (softcap > 0.0f ? "_cap" + floatTag(softcap) : "") +
           (fused ? "_q" + str(qStride) + "c" + str(qCol) + "_k" + str(kStride) + "c" + str(kCol) +
                        "_v" + str(vStride) + "c" + str(vCol)
                  : "") +
           (rope ? "_rope" + hashTag : "");
  k.source = translationUnit(k.name,
                             std::string(v.shape.decode ? "flash-decoding" : "tiled prefill") +
                                 " attention, " + str(heads) + " heads / " + str(kvHeads) +
                                 " KV heads of " + str(dim) + (rope ? ", RoPE on the fly" : ""),
                             "attention.cuh", spec, warps * 32, "StepArgs",
                             "llmc::dev::attention<" + std::string(deviceType(a)) + ", " +
                                 str(dim) + ", " + str(group) + ", " + str(kvHeads) + ", " +
                                 str(rowsPerBlock) + ", " + str(splits) + ", " + str(blockSize) +
                                 ", " + str(vec) + ", " + str(warps) +
                                 ", " + str(qStride) + ", " + str(kStride) + ", " + str(vStride) +
                                 ", " + str(qCol) + ", " + str(kCol) + ", " + str(vCol) + ", " +
                                 bool01(rope) + (rope ? ", RopeSpec" : "") + ">(args, " +
                                 floatLiteral(scale) + ", " + str(window) + ", " +
                                 floatLiteral(softcap) + ")");
  k.launch.block = {static_cast<uint32_t>(warps * 32), 1, 1};
  k.launch.grid = {1, static_cast<uint32_t>(kvHeads), static_cast<uint32_t>(splits)};
  k.launch.tokenAxis = 1;
  k.launch.tokensPerBlock = static_cast<uint32_t>(rowsPerBlock);
  k.launch.sharedBytes = static_cast<uint32_t>(sharedFloats * 4);
  if (splits > 1) {
    k.launch.workspaceBytesPerToken = static_cast<uint64_t>(heads * splits * (dim + 2) * 4);
    k.launch.countersPerToken = static_cast<uint64_t>(kvHeads);
  }
  return k;
}

} // namespace llmc::cuda::ops
