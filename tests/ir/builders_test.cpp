// The builders that graph builders use: each infers its result type, the
// result verifies, and a wrong shape is rejected with the verifier's message.
#include "ir/LlmOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <gtest/gtest.h>

#include <string>

using namespace mlir;
using namespace llmc::llm;

namespace {

class LlmBuildersTest : public ::testing::Test {
protected:
  LlmBuildersTest() : builder(&context), loc(builder.getUnknownLoc()) {
    context.loadDialect<LlmDialect, func::FuncDialect>();
    module = ModuleOp::create(loc);
    builder.setInsertionPointToEnd(module->getBody());
  }

  RankedTensorType tensor(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, builder.getF32Type());
  }

  // A function (tokens, positions) whose body the test fills in.
  func::FuncOp makeFunction() {
    auto ids = RankedTensorType::get({ShapedType::kDynamic}, builder.getI32Type());
    auto func =
        builder.create<func::FuncOp>(loc, "forward", builder.getFunctionType({ids, ids}, {}));
    builder.setInsertionPointToEnd(func.addEntryBlock());
    return func;
  }

  Value weight(StringRef name, ArrayRef<int64_t> shape) {
    return builder.create<WeightOp>(loc, tensor(shape), name);
  }

  // Verifies the module and returns the first diagnostic ("" when it verifies).
  std::string verifyMessage() {
    std::string message;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      if (message.empty())
        message = diag.str();
      return success();
    });
    if (succeeded(verify(*module)))
      return "";
    return message;
  }

  MLIRContext context;
  OpBuilder builder;
  Location loc;
  OwningOpRef<ModuleOp> module;
};

TEST_F(LlmBuildersTest, OneLayerInfersEveryResultType) {
  func::FuncOp func = makeFunction();
  Value tokens = func.getArgument(0), positions = func.getArgument(1);
  const int64_t kDyn = ShapedType::kDynamic;

  Value emb = weight("model.embed_tokens.weight", {128, 64});
  Value h = builder.create<EmbeddingOp>(loc, tokens, emb, builder.getF32Type());
  EXPECT_EQ(h.getType(), tensor({kDyn, 64}));
  Value x = builder.create<RmsNormOp>(loc, h, weight("ln", {64}), 1e-5);
  Value q = builder.create<LinearOp>(loc, x, weight("wq", {64, 64}));
  Value k = builder.create<LinearOp>(loc, x, weight("wk", {32, 64}), weight("bk", {32}));
  EXPECT_EQ(k.getType(), tensor({kDyn, 32}));
  auto scaling = RopeScalingAttr::get(&context, RopeScalingKind::Llama3, 8.0, 1.0, 4.0, 8192);
  auto rope = builder.create<RopeOp>(loc, q, positions, 4, 16, 5e5, scaling);
  EXPECT_EQ(rope.getScalingKind(), RopeScalingKind::Llama3);
  Value kr = builder.create<RopeOp>(loc, k, positions, 2, 16, 5e5);
  auto attention = builder.create<AttentionOp>(loc, rope, kr, k, 0, 4, 2, 16, 0.25, true);
  EXPECT_TRUE(attention.getCausal());
  EXPECT_EQ(attention.getType(), tensor({kDyn, 64}));
  Value sum = builder.create<AddOp>(loc, h, attention);
  Value act = builder.create<MulOp>(loc, builder.create<SiluOp>(loc, sum),
                                    builder.create<GeluOp>(loc, sum, /*tanh=*/true));
  auto logits = builder.create<LogitsOp>(loc, act, emb, builder.getF16Type());
  EXPECT_EQ(logits.getType(), RankedTensorType::get({kDyn, 128}, builder.getF16Type()));
  builder.create<func::ReturnOp>(loc);

  EXPECT_EQ(verifyMessage(), "");
  // Pure ops may be erased or merged; attention writes the KV cache.
  EXPECT_TRUE(isMemoryEffectFree(emb.getDefiningOp()));
  EXPECT_TRUE(isMemoryEffectFree(logits));
  EXPECT_FALSE(isMemoryEffectFree(attention));
  EXPECT_FALSE(wouldOpBeTriviallyDead(attention));
}

TEST_F(LlmBuildersTest, Q4LinearTakesRowsFromTheType) {
  func::FuncOp func = makeFunction();
  auto x = builder.create<EmbeddingOp>(loc, func.getArgument(0), weight("emb", {10, 200}),
                                       builder.getF16Type());
  auto q4 = Q4Type::get(&context, 64, 200, 128);
  EXPECT_EQ(q4.getNumGroups(), 2); // 200 = 128 + a ragged 72
  Value w = builder.create<WeightOp>(loc, q4, "q4");
  auto y = builder.create<LinearOp>(loc, x, w);
  EXPECT_EQ(y.getType(), RankedTensorType::get({ShapedType::kDynamic, 64}, builder.getF16Type()));
  builder.create<func::ReturnOp>(loc);
  EXPECT_EQ(verifyMessage(), "");
}

TEST_F(LlmBuildersTest, WrongShapeNamesBothSides) {
  func::FuncOp func = makeFunction();
  Value x = builder.create<EmbeddingOp>(loc, func.getArgument(0), weight("emb", {10, 128}),
                                        builder.getF32Type());
  builder.create<LinearOp>(loc, x, weight("w", {32, 64}));
  builder.create<func::ReturnOp>(loc);
  EXPECT_EQ(verifyMessage(), "'llm.linear' op weight has 64 input features but input has 128");
}

TEST_F(LlmBuildersTest, GroupedQueryHeadsMustDivide) {
  func::FuncOp func = makeFunction();
  Value q = builder.create<EmbeddingOp>(loc, func.getArgument(0), weight("e", {10, 96}),
                                        builder.getF32Type());
  Value kv = builder.create<EmbeddingOp>(loc, func.getArgument(0), weight("f", {10, 64}),
                                         builder.getF32Type());
  builder.create<AttentionOp>(loc, q, kv, kv, 0, 6, 4, 16, 0.25, true);
  builder.create<func::ReturnOp>(loc);
  EXPECT_EQ(verifyMessage(), "'llm.attention' op num_heads 6 is not a multiple of num_kv_heads 4");
}

} // namespace
