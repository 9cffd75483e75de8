//===- FuseSwiglu.cpp - llm-fuse-swiglu: gate/up GEMM + SwiGLU epilogue ---===//
//
// silu(x Wg^T) * (x Wu^T) as one llm.fused_linear over [Wg; Wu]: one GEMM
// reads x once and the [T, 2I] gate/up product is combined in registers
// instead of being written, read by silu, written, read by mul. Passes.td has
// the before/after IR; tests/lit/passes/fuse_swiglu.mlir the cases.
//
//===----------------------------------------------------------------------===//

#include "passes/FusionUtils.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace llmc {

#define GEN_PASS_DEF_LLMFUSESWIGLU
#include "passes/Passes.h.inc"

namespace {

struct SwigluMatch {
  llm::MulOp mul;
  llm::SiluOp silu;
  llm::LinearOp gate, up;
};

/// A bias-free projection with a stored (float or int4) weight and no other use.
llm::LinearOp projection(mlir::Value value) {
  auto linear = value.getDefiningOp<llm::LinearOp>();
  if (!linear || !linear->hasOneUse() || linear.getBias() ||
      !fusion::storedMatrix(linear.getWeight()))
    return {};
  return linear;
}

/// mul(silu(gate), up) in either operand order.
std::optional<SwigluMatch> match(llm::MulOp mul) {
  for (auto [act, other] :
       {std::pair(mul.getLhs(), mul.getRhs()), std::pair(mul.getRhs(), mul.getLhs())}) {
    auto silu = act.getDefiningOp<llm::SiluOp>();
    if (!silu || !silu->hasOneUse())
      continue;
    llm::LinearOp gate = projection(silu.getX()), up = projection(other);
    if (!gate || !up || gate == up || gate.getX() != up.getX() ||
        gate.getWeight().getType() != up.getWeight().getType())
      continue;
    return SwigluMatch{mul, silu, gate, up};
  }
  return std::nullopt;
}

void fuse(SwigluMatch m) {
  mlir::Operation *first = fusion::firstInBlock({m.gate, m.up});
  mlir::Value weights[] = {m.gate.getWeight(), m.up.getWeight()};
  fusion::hoistWeightsBefore(first, weights);
  mlir::OpBuilder builder(first);
  auto fused = builder.create<llm::FusedLinearOp>(first->getLoc(), m.gate.getX(), weights,
                                                  mlir::ValueRange(), mlir::Value(), 0.0,
                                                  mlir::Value(), /*swiglu=*/true);
  m.mul.getResult().replaceAllUsesWith(fused.getResult(0));
  m.mul.erase();
  m.silu.erase();
  m.gate.erase();
  m.up.erase();
}

class LlmFuseSwigluPass : public fusion::FusionPass<impl::LlmFuseSwigluBase<LlmFuseSwigluPass>> {
public:
  using FusionPass::FusionPass;

  void runOnOperation() override {
    llvm::SmallVector<SwigluMatch> matches;
    getOperation().walk([&](llm::MulOp mul) {
      if (auto m = match(mul))
        matches.push_back(*m);
    });
    for (SwigluMatch &m : matches)
      fuse(m);
    std::string summary;
    if (!matches.empty())
      summary = fusion::plural(matches.size(), "gate/up pair") + " -> llm.fused_linear swiglu (" +
                std::to_string(4 * matches.size()) + " ops merged)";
    finish(std::move(summary));
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createLlmFuseSwiglu(std::string *summary) {
  return std::make_unique<LlmFuseSwigluPass>(summary);
}

} // namespace llmc
