//===- FuseSwiglu.cpp - llm-fuse-swiglu: gate/up GEMM + gated epilogue ----===//
//
// act(x Wg^T) * (x Wu^T) as one llm.fused_linear over [Wg; Wu], act = silu
// (SwiGLU) or gelu in its tanh or erf form (GeGLU): one GEMM reads x once and
// the [T, 2I] gate/up product is combined in registers instead of being
// written, read by the activation, written, read by mul. Passes.td has the
// before/after IR; tests/lit/passes/fuse_swiglu.mlir the cases.
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
  mlir::Operation *act; // llm.silu or llm.gelu
  llm::GatedActivation activation;
  llm::LinearOp gate, up;
};

/// The gated activation `value` is the result of, None for other values.
llm::GatedActivation activationOf(mlir::Value value) {
  if (value.getDefiningOp<llm::SiluOp>())
    return llm::GatedActivation::SwiGlu;
  if (auto gelu = value.getDefiningOp<llm::GeluOp>())
    return gelu.getTanh() ? llm::GatedActivation::GeGluTanh : llm::GatedActivation::GeGluErf;
  return llm::GatedActivation::None;
}

/// A bias-free, unscaled projection with a stored (float or int4) weight and no other use.
llm::LinearOp projection(mlir::Value value) {
  auto linear = value.getDefiningOp<llm::LinearOp>();
  if (!linear || !linear->hasOneUse() || linear.getBias() ||
      !linear.getScale().isExactlyValue(1.0) || !fusion::storedMatrix(linear.getWeight()))
    return {};
  return linear;
}

/// mul(act(gate), up) in either operand order.
std::optional<SwigluMatch> match(llm::MulOp mul) {
  for (auto [actValue, other] :
       {std::pair(mul.getLhs(), mul.getRhs()), std::pair(mul.getRhs(), mul.getLhs())}) {
    llm::GatedActivation activation = activationOf(actValue);
    mlir::Operation *act = actValue.getDefiningOp();
    if (activation == llm::GatedActivation::None || !act->hasOneUse())
      continue;
    llm::LinearOp gate = projection(act->getOperand(0)), up = projection(other);
    if (!gate || !up || gate == up || gate.getX() != up.getX() ||
        gate.getWeight().getType() != up.getWeight().getType())
      continue;
    return SwigluMatch{mul, act, activation, gate, up};
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
                                                  mlir::Value(), m.activation);
  m.mul.getResult().replaceAllUsesWith(fused.getResult(0));
  m.mul.erase();
  m.act->erase();
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
      summary = fusion::plural(matches.size(), "gate/up pair") + " -> llm.fused_linear " +
                stringifyGatedActivation(matches.front().activation).str() + " (" +
                std::to_string(4 * matches.size()) + " ops merged)";
    finish(std::move(summary));
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createLlmFuseSwiglu(std::string *summary) {
  return std::make_unique<LlmFuseSwigluPass>(summary);
}

} // namespace llmc
