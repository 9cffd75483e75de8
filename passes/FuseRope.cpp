//===- FuseRope.cpp - llm-fuse-rope: RoPE + KV write in the attention -----===//
//
// The attention kernel rotates q as it loads it and k as it writes it to the
// KV cache, so neither rotated activation is stored and the two in-place
// RoPE passes over q and k disappear. Passes.td has the before/after IR;
// tests/lit/passes/fuse_rope.mlir the cases.
//
//===----------------------------------------------------------------------===//

#include "passes/FusionUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace llmc {

#define GEN_PASS_DEF_LLMFUSEROPE
#include "passes/Passes.h.inc"

namespace {

/// Both operands rotated by ropes with the same positions and frequencies
/// (one table serves both), each used only by the attention.
bool fusible(llm::AttentionOp attention, llm::RopeOp q, llm::RopeOp k) {
  return q && k && q != k && q->hasOneUse() && k->hasOneUse() &&
         q.getPositions() == k.getPositions() && q.getThetaAttr() == k.getThetaAttr() &&
         q.getScalingAttr() == k.getScalingAttr() && q.getRotaryDim() == k.getRotaryDim() &&
         q.getInterleaved() == k.getInterleaved() && q.getHeadDim() == attention.getHeadDim() &&
         k.getHeadDim() == attention.getHeadDim();
}

void fuse(llm::AttentionOp attention, llm::RopeOp q, llm::RopeOp k) {
  mlir::OpBuilder builder(attention);
  auto fused = builder.create<llm::RopeAttentionOp>(
      attention.getLoc(), q.getX(), k.getX(), attention.getV(), q.getPositions(),
      attention.getLayer(), attention.getNumHeads(), attention.getNumKvHeads(),
      attention.getHeadDim(), q.getTheta().convertToDouble(), q.getScalingAttr(),
      attention.getScale().convertToDouble(), attention.getCausal(),
      attention.getSoftcap().convertToDouble(), attention.getWindow(), q.getRotaryDim(),
      q.getInterleaved());
  attention.getResult().replaceAllUsesWith(fused.getResult());
  attention.erase();
  q.erase();
  k.erase();
}

class LlmFuseRopePass : public fusion::FusionPass<impl::LlmFuseRopeBase<LlmFuseRopePass>> {
public:
  using FusionPass::FusionPass;

  void runOnOperation() override {
    llvm::SmallVector<llm::AttentionOp> attentions;
    getOperation().walk([&](llm::AttentionOp op) { attentions.push_back(op); });
    int64_t fused = 0;
    for (llm::AttentionOp attention : attentions) {
      auto q = attention.getQ().getDefiningOp<llm::RopeOp>();
      auto k = attention.getK().getDefiningOp<llm::RopeOp>();
      if (fusible(attention, q, k)) {
        fuse(attention, q, k);
        ++fused;
      }
    }
    std::string summary;
    if (fused > 0)
      summary = fusion::plural(fused, "attention") + " + " + std::to_string(2 * fused) +
                " RoPEs -> llm.rope_attention";
    finish(std::move(summary));
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createLlmFuseRope(std::string *summary) {
  return std::make_unique<LlmFuseRopePass>(summary);
}

} // namespace llmc
