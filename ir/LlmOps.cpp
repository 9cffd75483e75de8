//===- LlmOps.cpp - llm dialect operations --------------------------------===//
//
// Builders that infer result types, the custom type directives of the
// assembly formats, and the verifiers. ODS constraints have already checked
// ranks and dtypes when a verifier runs; verifiers check how shapes relate.
//
//===----------------------------------------------------------------------===//

#include "ir/LlmOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>

using namespace mlir;

namespace llmc::llm {
namespace {

//===----------------------------------------------------------------------===//
// Shape helpers. They tolerate any type so that builders given a wrong value
// still build an op, which the verifier then rejects with a message.
//===----------------------------------------------------------------------===//

/// Size of dimension `dim` of a ranked tensor, kDynamic if there is none.
int64_t dimSize(Type type, unsigned dim) {
  auto tensor = type.dyn_cast<RankedTensorType>();
  if (!tensor || tensor.getRank() <= dim)
    return ShapedType::kDynamic;
  return tensor.getDimSize(dim);
}

/// [rows, cols] of a weight matrix: a rank-2 tensor or a !llm.q4.
std::pair<int64_t, int64_t> matrixShape(Type type) {
  if (auto q4 = type.dyn_cast<Q4Type>())
    return {q4.getRows(), q4.getCols()};
  return {dimSize(type, 0), dimSize(type, 1)};
}

/// An activation [tokens, features] with x's token dimension.
RankedTensorType activationLike(Value tokensFrom, int64_t features, Type elementType) {
  return RankedTensorType::get({dimSize(tokensFrom.getType(), 0), features}, elementType);
}

//===----------------------------------------------------------------------===//
// Verifier helpers: each names the op (emitOpError) and both sides.
// Diagnostics quote the types they print: 'tensor<?x64xf32>'.
//===----------------------------------------------------------------------===//

LogicalResult checkStaticFeatures(Operation *op, StringRef name, Value value) {
  if (ShapedType::isDynamic(dimSize(value.getType(), 1)))
    return op->emitOpError() << name << " must have a static feature dimension, got "
                             << value.getType();
  return success();
}

LogicalResult checkStaticShape(Operation *op, StringRef name, Value value) {
  auto tensor = value.getType().dyn_cast<RankedTensorType>();
  if (tensor && !tensor.hasStaticShape())
    return op->emitOpError() << name << " must have a static shape, got " << value.getType();
  return success();
}

/// Token counts must agree where both are known.
LogicalResult checkSameTokens(Operation *op, StringRef name, Value value, StringRef refName,
                              Value ref) {
  int64_t tokens = dimSize(value.getType(), 0), refTokens = dimSize(ref.getType(), 0);
  if (!ShapedType::isDynamic(tokens) && !ShapedType::isDynamic(refTokens) && tokens != refTokens)
    return op->emitOpError() << name << " has " << tokens << " tokens but " << refName << " has "
                             << refTokens;
  return success();
}

LogicalResult checkSameType(Operation *op, StringRef name, Value value, StringRef refName,
                            Value ref) {
  if (value.getType() != ref.getType())
    return op->emitOpError() << name << " type " << value.getType() << " does not match " << refName
                             << " type " << ref.getType();
  return success();
}

LogicalResult checkSameElementType(Operation *op, StringRef name, Value value, StringRef refName,
                                   Value ref) {
  Type type = getElementTypeOrSelf(value.getType()), refType = getElementTypeOrSelf(ref.getType());
  if (type != refType)
    return op->emitOpError() << name << " element type " << type << " does not match " << refName
                             << " element type " << refType;
  return success();
}

LogicalResult checkPositive(Operation *op, StringRef name, int64_t value) {
  if (value <= 0)
    return op->emitOpError() << name << " must be positive, got " << value;
  return success();
}

LogicalResult checkPositive(Operation *op, StringRef name, APFloat value) {
  if (!(value.convertToDouble() > 0))
    return op->emitOpError() << name << " must be positive, got " << value.convertToDouble();
  return success();
}

/// A projection's result [T, features]: `features` must be what the weight
/// gives ("<weightName> has <features> <unit>") and the token count what the
/// input has.
LogicalResult checkProjectionResult(Operation *op, Value result, StringRef weightName,
                                    int64_t features, StringRef unit, StringRef tokensName,
                                    Value tokensFrom) {
  if (LogicalResult ok = checkStaticFeatures(op, "result", result); failed(ok))
    return ok;
  int64_t resultFeatures = dimSize(result.getType(), 1);
  if (resultFeatures != features)
    return op->emitOpError() << "result has " << resultFeatures << " features but " << weightName
                             << " has " << features << " " << unit;
  return checkSameTokens(op, "result", result, tokensName, tokensFrom);
}

} // namespace

//===----------------------------------------------------------------------===//
// Custom type directives
//===----------------------------------------------------------------------===//

/// `custom<WithResultType>(type($x), type($result))`: x's type, then
/// `-> result` only when the result type differs from x's (which only an
/// invalid op does).
static ParseResult parseWithResultType(OpAsmParser &parser, Type &type, Type &resultType) {
  if (parser.parseType(type))
    return failure();
  resultType = type;
  if (succeeded(parser.parseOptionalArrow()))
    return parser.parseType(resultType);
  return success();
}

static void printWithResultType(OpAsmPrinter &printer, Operation *, Type type, Type resultType) {
  printer << type;
  if (resultType != type)
    printer << " -> " << resultType;
}

/// `custom<WithResultType>(ref(type($x)), type($last), type($result))`: the
/// last operand's type, then `-> result` only when it differs from x's.
static ParseResult parseWithResultType(OpAsmParser &parser, Type refType, Type &type,
                                       Type &resultType) {
  resultType = refType;
  if (parser.parseType(type))
    return failure();
  if (succeeded(parser.parseOptionalArrow()))
    return parser.parseType(resultType);
  return success();
}

static void printWithResultType(OpAsmPrinter &printer, Operation *, Type refType, Type type,
                                Type resultType) {
  printer << type;
  if (resultType != refType)
    printer << " -> " << resultType;
}

/// `custom<BinaryTypes>(...)`: one type when lhs, rhs and result agree,
/// otherwise `lhs, rhs -> result`.
static ParseResult parseBinaryTypes(OpAsmParser &parser, Type &lhs, Type &rhs, Type &result) {
  if (parser.parseType(lhs))
    return failure();
  rhs = lhs;
  result = lhs;
  if (succeeded(parser.parseOptionalComma()) && parser.parseType(rhs))
    return failure();
  if (succeeded(parser.parseOptionalArrow()) && parser.parseType(result))
    return failure();
  return success();
}

static void printBinaryTypes(OpAsmPrinter &printer, Operation *, Type lhs, Type rhs, Type result) {
  printer << lhs;
  if (rhs != lhs || result != lhs)
    printer << ", " << rhs << " -> " << result;
}

/// `custom<Gated>($activation)`: the keyword of a gated activation
/// (`swiglu`, `geglu_tanh`, `geglu_erf`), nothing for none.
static ParseResult parseGated(OpAsmParser &parser, GatedActivationAttr &activation) {
  const GatedActivation gated[] = {GatedActivation::SwiGlu, GatedActivation::GeGluTanh,
                                   GatedActivation::GeGluErf};
  for (GatedActivation kind : gated) {
    if (succeeded(parser.parseOptionalKeyword(stringifyGatedActivation(kind)))) {
      activation = GatedActivationAttr::get(parser.getContext(), kind);
      return success();
    }
  }
  return success(); // none: the attribute keeps its default
}

static void printGated(OpAsmPrinter &printer, Operation *, GatedActivationAttr activation) {
  if (activation && activation.getValue() != GatedActivation::None)
    printer << stringifyGatedActivation(activation.getValue());
}

/// A soft-capping value: 0 (off) or positive.
static LogicalResult checkSoftcap(Operation *op, StringRef name, APFloat value) {
  double cap = value.convertToDouble();
  if (!(cap >= 0) || std::isinf(cap))
    return op->emitOpError() << name << " must be 0 (off) or a positive finite value, got "
                             << cap;
  return success();
}

//===----------------------------------------------------------------------===//
// llm.weight
//===----------------------------------------------------------------------===//

LogicalResult WeightOp::verify() {
  if (getName().empty())
    return emitOpError() << "name must not be empty";
  return checkStaticShape(*this, "result", getResult());
}

//===----------------------------------------------------------------------===//
// llm.embedding
//===----------------------------------------------------------------------===//

void EmbeddingOp::build(OpBuilder &builder, OperationState &state, Value tokens, Value table,
                        Type elementType, double scale) {
  build(builder, state, activationLike(tokens, dimSize(table.getType(), 1), elementType), tokens,
        table, builder.getF64FloatAttr(scale));
}

LogicalResult EmbeddingOp::verify() {
  if (failed(checkStaticShape(*this, "table", getTable())))
    return failure();
  if (double scale = getScale().convertToDouble(); !std::isfinite(scale) || scale == 0)
    return emitOpError() << "scale must be finite and non-zero, got " << scale;
  return checkProjectionResult(*this, getResult(), "table", dimSize(getTable().getType(), 1),
                               "columns", "tokens", getTokens());
}

//===----------------------------------------------------------------------===//
// llm.rms_norm
//===----------------------------------------------------------------------===//

void RmsNormOp::build(OpBuilder &builder, OperationState &state, Value x, Value weight,
                      double eps, double offset, int64_t group) {
  build(builder, state, x.getType(), x, weight, builder.getF64FloatAttr(eps),
        builder.getF64FloatAttr(offset), builder.getI64IntegerAttr(group));
}

int64_t RmsNormOp::getGroupWidth() {
  return getGroup() == 0 ? dimSize(getX().getType(), 1) : getGroup();
}

LogicalResult RmsNormOp::verify() {
  if (failed(checkStaticFeatures(*this, "input", getX())) ||
      failed(checkStaticShape(*this, "weight", getWeight())))
    return failure();
  int64_t features = dimSize(getX().getType(), 1), size = dimSize(getWeight().getType(), 0);
  int64_t group = getGroup();
  if (group < 0 || (group > 0 && features % group != 0))
    return emitOpError() << "group must be 0 or divide the input's " << features
                         << " features, got " << group;
  if (size != getGroupWidth())
    return emitOpError() << "weight has " << size << " elements but "
                         << (group == 0 ? "input has " : "each group has ") << getGroupWidth()
                         << " features";
  if (failed(checkPositive(*this, "eps", getEpsAttr().getValue())))
    return failure();
  if (!std::isfinite(getOffset().convertToDouble()))
    return emitOpError() << "offset must be finite, got " << getOffset().convertToDouble();
  return checkSameType(*this, "result", getResult(), "input", getX());
}

//===----------------------------------------------------------------------===//
// llm.layer_norm
//===----------------------------------------------------------------------===//

void LayerNormOp::build(OpBuilder &builder, OperationState &state, Value x, Value weight,
                        Value bias, double eps, int64_t group) {
  build(builder, state, x.getType(), x, weight, bias, builder.getF64FloatAttr(eps),
        builder.getI64IntegerAttr(group));
}

int64_t LayerNormOp::getGroupWidth() {
  int64_t group = getGroupAttr().getInt();
  return group != 0 ? group : dimSize(getX().getType(), 1);
}

namespace {

/// A LayerNorm scale or bias holds one value per feature (`features`
/// elements) or one per feature of a group (`group`), in rank 1 or 2.
LogicalResult checkNormScale(Operation *op, StringRef name, Value value, int64_t features,
                             int64_t group) {
  if (failed(checkStaticShape(op, name, value)))
    return failure();
  auto type = llvm::cast<RankedTensorType>(value.getType());
  if (type.getRank() < 1 || type.getRank() > 2)
    return op->emitOpError() << name << " must have rank 1 or 2, got " << type;
  int64_t elements = type.getNumElements();
  if (elements != features && elements != group)
    return op->emitOpError() << name << " has " << elements << " elements but input has "
                             << features << " features in groups of " << group;
  return success();
}

} // namespace

LogicalResult LayerNormOp::verify() {
  if (failed(checkStaticFeatures(*this, "input", getX())))
    return failure();
  int64_t features = dimSize(getX().getType(), 1), group = getGroupWidth();
  if (group <= 0 || features % group != 0)
    return emitOpError() << "group " << getGroupAttr().getInt() << " must be 0 (whole rows) or divide the "
                         << features << " input features";
  if (failed(checkNormScale(*this, "weight", getWeight(), features, group)) ||
      (getBias() && failed(checkNormScale(*this, "bias", getBias(), features, group))) ||
      failed(checkPositive(*this, "eps", getEpsAttr().getValue())))
    return failure();
  return checkSameType(*this, "result", getResult(), "input", getX());
}

//===----------------------------------------------------------------------===//
// llm.linear
//===----------------------------------------------------------------------===//

void LinearOp::build(OpBuilder &builder, OperationState &state, Value x, Value weight, Value bias,
                     double scale) {
  Type elementType = getElementTypeOrSelf(x.getType());
  build(builder, state, activationLike(x, matrixShape(weight.getType()).first, elementType), x,
        weight, bias, builder.getF64FloatAttr(scale));
}

LogicalResult LinearOp::verify() {
  if (failed(checkStaticFeatures(*this, "input", getX())) ||
      failed(checkStaticShape(*this, "weight", getWeight())))
    return failure();
  auto [outFeatures, inFeatures] = matrixShape(getWeight().getType());
  int64_t features = dimSize(getX().getType(), 1);
  if (inFeatures != features)
    return emitOpError() << "weight has " << inFeatures << " input features but input has "
                         << features;
  if (Value bias = getBias()) {
    if (failed(checkStaticShape(*this, "bias", bias)))
      return failure();
    int64_t size = dimSize(bias.getType(), 0);
    if (size != outFeatures)
      return emitOpError() << "bias has " << size << " elements but weight has " << outFeatures
                           << " output features";
  }
  if (double scale = getScale().convertToDouble(); !std::isfinite(scale) || scale == 0.0)
    return emitOpError() << "scale must be finite and non-zero, got " << scale;
  if (failed(checkSameElementType(*this, "result", getResult(), "input", getX())))
    return failure();
  return checkProjectionResult(*this, getResult(), "weight", outFeatures, "output features",
                               "input", getX());
}

/// rotary_dim: 0 (the whole head) or an even count in [2, head_dim]; a
/// longrope scaling carries one short and one long factor per rotated pair.
template <typename Op> LogicalResult checkRotary(Op op, int64_t headDim) {
  int64_t rotaryDim = op.getRotaryDim();
  if (rotaryDim != 0 && (rotaryDim < 2 || rotaryDim > headDim || rotaryDim % 2 != 0))
    return op.emitOpError() << "rotary_dim must be 0 or even in [2, head_dim " << headDim
                            << "], got " << rotaryDim;
  RopeScalingAttr scaling = op.getScalingAttr();
  int64_t pairs = (rotaryDim == 0 ? headDim : rotaryDim) / 2;
  if (scaling && scaling.getKind() == RopeScalingKind::LongRope &&
      static_cast<int64_t>(scaling.getShortFactor().size()) != pairs)
    return op.emitOpError() << "longrope scaling has " << scaling.getShortFactor().size()
                            << " factors per set but the op rotates " << pairs << " pairs";
  return success();
}

//===----------------------------------------------------------------------===//
// llm.rope
//===----------------------------------------------------------------------===//

void RopeOp::build(OpBuilder &builder, OperationState &state, Value x, Value positions,
                   int64_t numHeads, int64_t headDim, double theta, RopeScalingAttr scaling,
                   int64_t rotaryDim, bool interleaved) {
  build(builder, state, x.getType(), x, positions, builder.getI64IntegerAttr(numHeads),
        builder.getI64IntegerAttr(headDim), builder.getF64FloatAttr(theta), scaling,
        builder.getI64IntegerAttr(rotaryDim), interleaved ? builder.getUnitAttr() : UnitAttr());
}

int64_t RopeOp::getRotatedFeatures() {
  return getRotaryDim() == 0 ? getHeadDim() : getRotaryDim();
}

RopeScalingKind RopeOp::getScalingKind() {
  if (RopeScalingAttr scaling = getScalingAttr())
    return scaling.getKind();
  return RopeScalingKind::None;
}

LogicalResult RopeOp::verify() {
  int64_t numHeads = getNumHeads(), headDim = getHeadDim();
  if (failed(checkPositive(*this, "num_heads", numHeads)) ||
      failed(checkPositive(*this, "head_dim", headDim)) ||
      failed(checkPositive(*this, "theta", getThetaAttr().getValue())))
    return failure();
  // rotate_half pairs element i with i + head_dim / 2.
  if (headDim % 2 != 0)
    return emitOpError() << "head_dim must be even, got " << headDim;
  if (failed(checkRotary(*this, headDim)))
    return failure();
  int64_t features = dimSize(getX().getType(), 1);
  if (features != numHeads * headDim)
    return emitOpError() << "input has " << features
                         << " features but num_heads * head_dim = " << numHeads << " * " << headDim
                         << " = " << numHeads * headDim;
  if (failed(checkSameTokens(*this, "positions", getPositions(), "input", getX())))
    return failure();
  return checkSameType(*this, "result", getResult(), "input", getX());
}

//===----------------------------------------------------------------------===//
// llm.attention
//===----------------------------------------------------------------------===//

void AttentionOp::build(OpBuilder &builder, OperationState &state, Value q, Value k, Value v,
                        int64_t layer, int64_t numHeads, int64_t numKvHeads, int64_t headDim,
                        double scale, bool causal, double softcap, int64_t window) {
  build(builder, state, q.getType(), q, k, v, builder.getI64IntegerAttr(layer),
        builder.getI64IntegerAttr(numHeads), builder.getI64IntegerAttr(numKvHeads),
        builder.getI64IntegerAttr(headDim), builder.getF64FloatAttr(scale),
        causal ? builder.getUnitAttr() : UnitAttr(), builder.getF64FloatAttr(softcap),
        builder.getI64IntegerAttr(window));
}

/// softcap and window, shared by llm.attention and llm.rope_attention.
template <typename AttentionLikeOp>
static LogicalResult checkSoftcapWindow(AttentionLikeOp op) {
  if (failed(checkSoftcap(op, "softcap", op.getSoftcapAttr().getValue())))
    return failure();
  if (int64_t window = op.getWindowAttr().getInt(); window < 0)
    return op.emitOpError() << "window must be 0 (off) or positive, got " << window;
  return success();
}

/// q, k or v must have `heads * headDim` features.
static LogicalResult checkHeadFeatures(Operation *op, StringRef name, Value value,
                                       StringRef headsName, int64_t heads, int64_t headDim) {
  int64_t features = dimSize(value.getType(), 1);
  if (features != heads * headDim)
    return op->emitOpError() << name << " has " << features << " features but " << headsName
                             << " * head_dim = " << heads << " * " << headDim << " = "
                             << heads * headDim;
  return success();
}

// The q/k/v checks llm.attention and llm.rope_attention share. Grouped-query
// attention: each kv head serves num_heads / num_kv_heads query heads; q has
// num_heads x head_dim features, k and v num_kv_heads x head_dim, all with
// one element type and one token count.
template <typename AttentionLikeOp>
static LogicalResult checkQkv(AttentionLikeOp op, int64_t numHeads, int64_t numKvHeads,
                              int64_t headDim) {
  if (numHeads % numKvHeads != 0)
    return op.emitOpError() << "num_heads " << numHeads << " is not a multiple of num_kv_heads "
                            << numKvHeads;
  if (failed(checkHeadFeatures(op, "q", op.getQ(), "num_heads", numHeads, headDim)) ||
      failed(checkHeadFeatures(op, "k", op.getK(), "num_kv_heads", numKvHeads, headDim)) ||
      failed(checkHeadFeatures(op, "v", op.getV(), "num_kv_heads", numKvHeads, headDim)))
    return failure();
  if (failed(checkSameElementType(op, "k", op.getK(), "q", op.getQ())) ||
      failed(checkSameElementType(op, "v", op.getV(), "q", op.getQ())) ||
      failed(checkSameTokens(op, "k", op.getK(), "q", op.getQ())) ||
      failed(checkSameTokens(op, "v", op.getV(), "q", op.getQ())))
    return failure();
  return success();
}

LogicalResult AttentionOp::verify() {
  int64_t layer = getLayer(), numHeads = getNumHeads(), numKvHeads = getNumKvHeads(),
          headDim = getHeadDim();
  if (layer < 0)
    return emitOpError() << "layer must be non-negative, got " << layer;
  if (failed(checkPositive(*this, "num_heads", numHeads)) ||
      failed(checkPositive(*this, "num_kv_heads", numKvHeads)) ||
      failed(checkPositive(*this, "head_dim", headDim)) ||
      failed(checkPositive(*this, "scale", getScaleAttr().getValue())) ||
      failed(checkSoftcapWindow(*this)))
    return failure();
  if (failed(checkQkv(*this, numHeads, numKvHeads, headDim)))
    return failure();
  return checkSameType(*this, "result", getResult(), "q", getQ());
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

static LogicalResult verifyBinary(Operation *op, Value lhs, Value rhs, Value result) {
  if (failed(checkStaticFeatures(op, "lhs", lhs)) ||
      failed(checkSameType(op, "rhs", rhs, "lhs", lhs)))
    return failure();
  return checkSameType(op, "result", result, "lhs", lhs);
}

LogicalResult AddOp::verify() { return verifyBinary(*this, getLhs(), getRhs(), getResult()); }

LogicalResult MulOp::verify() { return verifyBinary(*this, getLhs(), getRhs(), getResult()); }

static LogicalResult verifyUnary(Operation *op, Value x, Value result) {
  if (failed(checkStaticFeatures(op, "input", x)))
    return failure();
  return checkSameType(op, "result", result, "input", x);
}

LogicalResult SiluOp::verify() { return verifyUnary(*this, getX(), getResult()); }

LogicalResult GeluOp::verify() { return verifyUnary(*this, getX(), getResult()); }

//===----------------------------------------------------------------------===//
// llm.logits
//===----------------------------------------------------------------------===//

void LogitsOp::build(OpBuilder &builder, OperationState &state, Value x, Value weight,
                     Type elementType, double softcap, Value bias, double scale) {
  build(builder, state, activationLike(x, dimSize(weight.getType(), 0), elementType), x, weight,
        bias, builder.getF64FloatAttr(scale), builder.getF64FloatAttr(softcap));
}

bool LogitsOp::isPlainProjection() { return !getBias() && getScale().convertToDouble() == 1.0; }

LogicalResult LogitsOp::verify() {
  if (failed(checkStaticFeatures(*this, "input", getX())) ||
      failed(checkStaticShape(*this, "weight", getWeight())) ||
      failed(checkSoftcap(*this, "softcap", getSoftcapAttr().getValue())))
    return failure();
  int64_t hidden = dimSize(getWeight().getType(), 1), features = dimSize(getX().getType(), 1);
  if (hidden != features)
    return emitOpError() << "weight has " << hidden << " columns but input has " << features
                         << " features";
  int64_t vocab = dimSize(getWeight().getType(), 0);
  if (getBias() && dimSize(getBias().getType(), 0) != vocab)
    return emitOpError() << "bias has " << dimSize(getBias().getType(), 0)
                         << " elements but weight has " << vocab << " vocabulary rows";
  if (double scale = getScale().convertToDouble(); !std::isfinite(scale) || scale == 0)
    return emitOpError() << "scale must be finite and non-zero, got " << scale;
  return checkProjectionResult(*this, getResult(), "weight", vocab, "vocabulary rows", "input",
                               getX());
}

//===----------------------------------------------------------------------===//
// llm.fused_linear
//===----------------------------------------------------------------------===//

void FusedLinearOp::build(OpBuilder &builder, OperationState &state, Value x, ValueRange weights,
                          ValueRange biases, Value norm, double eps, Value residual,
                          GatedActivation activation, double normOffset, double scale) {
  Type elementType = getElementTypeOrSelf(x.getType());
  bool gated = activation != GatedActivation::None;
  SmallVector<Type> results;
  for (Value w : gated ? weights.take_front() : weights)
    results.push_back(activationLike(x, matrixShape(w.getType()).first, elementType));
  build(builder, state, results, x, weights, biases, norm, residual,
        norm ? builder.getF64FloatAttr(eps) : FloatAttr(),
        builder.getF64FloatAttr(norm ? normOffset : 0.0),
        GatedActivationAttr::get(builder.getContext(), activation),
        builder.getF64FloatAttr(scale));
}

std::string weightStorage(Type type) {
  if (auto q4 = type.dyn_cast<Q4Type>())
    return "int4 in groups of " + std::to_string(q4.getGroupSize());
  std::string text;
  llvm::raw_string_ostream os(text);
  os << getElementTypeOrSelf(type);
  return os.str();
}

/// Weights: static [N_i, K] stored alike; biases: none or one [N_i] each.
static LogicalResult verifyFusedWeights(FusedLinearOp op, int64_t features) {
  auto weights = op.getWeights();
  if (weights.empty())
    return op.emitOpError() << "needs at least one weight";
  std::string storage = weightStorage(weights[0].getType());
  for (auto [i, w] : llvm::enumerate(weights)) {
    std::string name = "weight " + std::to_string(i);
    if (failed(checkStaticShape(op, name, w)))
      return failure();
    if (int64_t cols = matrixShape(w.getType()).second; cols != features)
      return op.emitOpError() << name << " has " << cols << " input features but input has "
                              << features;
    if (weightStorage(w.getType()) != storage)
      return op.emitOpError() << name << " is " << weightStorage(w.getType()) << " but weight 0 is "
                              << storage << " (fused weights are stored as one tensor)";
  }
  auto biases = op.getBiases();
  if (biases.empty())
    return success();
  if (biases.size() != weights.size())
    return op.emitOpError() << "has " << biases.size() << " biases for " << weights.size()
                            << " weights (one per weight, or none)";
  Type biasType = getElementTypeOrSelf(biases[0].getType());
  for (auto [i, b] : llvm::enumerate(biases)) {
    int64_t size = dimSize(b.getType(), 0), rows = matrixShape(weights[i].getType()).first;
    if (size != rows)
      return op.emitOpError() << "bias " << i << " has " << size << " elements but weight " << i
                              << " has " << rows << " output features";
    if (getElementTypeOrSelf(b.getType()) != biasType)
      return op.emitOpError() << "bias " << i << " element type "
                              << getElementTypeOrSelf(b.getType())
                              << " does not match bias 0 element type " << biasType;
  }
  return success();
}

/// The norm prologue: a weight [K] and eps > 0, both or neither.
static LogicalResult verifyFusedNorm(FusedLinearOp op, int64_t features) {
  Value norm = op.getNorm();
  if (!norm && !op.getEpsAttr()) {
    if (op.getNormOffset().convertToDouble() != 0)
      return op.emitOpError() << "norm_offset needs a norm weight";
    return success();
  }
  if (!norm || !op.getEpsAttr())
    return op.emitOpError() << "norm weight and eps go together";
  if (!std::isfinite(op.getNormOffset().convertToDouble()))
    return op.emitOpError() << "norm_offset must be finite, got "
                            << op.getNormOffset().convertToDouble();
  if (failed(checkStaticShape(op, "norm weight", norm)))
    return failure();
  if (int64_t size = dimSize(norm.getType(), 0); size != features)
    return op.emitOpError() << "norm weight has " << size << " elements but input has " << features
                            << " features";
  return checkPositive(op, "eps", op.getEpsAttr().getValue());
}

LogicalResult FusedLinearOp::verify() {
  if (failed(checkStaticFeatures(*this, "input", getX())))
    return failure();
  int64_t features = dimSize(getX().getType(), 1);
  if (failed(verifyFusedWeights(*this, features)) || failed(verifyFusedNorm(*this, features)))
    return failure();
  auto weights = getWeights();
  auto results = getResults();
  SmallVector<int64_t> expected;
  if (isGated()) {
    StringRef name = stringifyGatedActivation(getActivation());
    if (weights.size() != 2)
      return emitOpError() << name << " needs 2 weights (gate, up), got " << weights.size();
    int64_t gate = matrixShape(weights[0].getType()).first,
            up = matrixShape(weights[1].getType()).first;
    if (gate != up)
      return emitOpError() << name << " gate has " << gate << " output features but up has "
                           << up;
    if (!getBiases().empty())
      return emitOpError() << name << " takes no biases";
    expected.push_back(gate);
  } else {
    for (Value w : weights)
      expected.push_back(matrixShape(w.getType()).first);
  }
  if (results.size() != expected.size())
    return emitOpError() << "has " << results.size() << " results but expects " << expected.size();
  if (double scale = getScale().convertToDouble(); scale != 1.0) {
    if (!std::isfinite(scale) || scale == 0.0)
      return emitOpError() << "scale must be finite and non-zero, got " << scale;
    if (results.size() != 1 || isGated())
      return emitOpError() << "scale " << scale << " needs one ungated result";
  }
  for (auto [i, result] : llvm::enumerate(results)) {
    if (failed(checkSameElementType(*this, "result", result, "input", getX())) ||
        failed(checkStaticFeatures(*this, "result", result)) ||
        failed(checkSameTokens(*this, "result", result, "input", getX())))
      return failure();
    if (int64_t got = dimSize(result.getType(), 1); got != expected[i])
      return emitOpError() << "result " << i << " has " << got << " features but expects "
                           << expected[i];
  }
  if (Value residual = getResidual()) {
    if (results.size() != 1)
      return emitOpError() << "residual needs exactly one result, got " << results.size();
    return checkSameType(*this, "residual", residual, "result", results[0]);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// llm.rope_attention
//===----------------------------------------------------------------------===//

void RopeAttentionOp::build(OpBuilder &builder, OperationState &state, Value q, Value k, Value v,
                            Value positions, int64_t layer, int64_t numHeads, int64_t numKvHeads,
                            int64_t headDim, double theta, RopeScalingAttr scaling, double scale,
                            bool causal, double softcap, int64_t window, int64_t rotaryDim,
                            bool interleaved) {
  build(builder, state, q.getType(), q, k, v, positions, builder.getI64IntegerAttr(layer),
        builder.getI64IntegerAttr(numHeads), builder.getI64IntegerAttr(numKvHeads),
        builder.getI64IntegerAttr(headDim), builder.getF64FloatAttr(theta), scaling,
        builder.getF64FloatAttr(scale), causal ? builder.getUnitAttr() : UnitAttr(),
        builder.getF64FloatAttr(softcap), builder.getI64IntegerAttr(window),
        builder.getI64IntegerAttr(rotaryDim), interleaved ? builder.getUnitAttr() : UnitAttr());
}

LogicalResult RopeAttentionOp::verify() {
  int64_t layer = getLayer(), numHeads = getNumHeads(), numKvHeads = getNumKvHeads(),
          headDim = getHeadDim();
  if (layer < 0)
    return emitOpError() << "layer must be non-negative, got " << layer;
  if (failed(checkPositive(*this, "num_heads", numHeads)) ||
      failed(checkPositive(*this, "num_kv_heads", numKvHeads)) ||
      failed(checkPositive(*this, "head_dim", headDim)) ||
      failed(checkPositive(*this, "theta", getThetaAttr().getValue())) ||
      failed(checkPositive(*this, "scale", getScaleAttr().getValue())) ||
      failed(checkSoftcapWindow(*this)))
    return failure();
  if (headDim % 2 != 0)
    return emitOpError() << "head_dim must be even, got " << headDim;
  if (failed(checkRotary(*this, headDim)) ||
      failed(checkQkv(*this, numHeads, numKvHeads, headDim)) ||
      failed(checkSameTokens(*this, "positions", getPositions(), "q", getQ())))
    return failure();
  return checkSameType(*this, "result", getResult(), "q", getQ());
}

//===----------------------------------------------------------------------===//
// llm.lm_head
//===----------------------------------------------------------------------===//

void LmHeadOp::build(OpBuilder &builder, OperationState &state, Value x, Value norm, Value weight,
                     double eps, double offset, double softcap) {
  Type logits = activationLike(x, dimSize(weight.getType(), 0), builder.getF32Type());
  Type ids = RankedTensorType::get({dimSize(x.getType(), 0)}, builder.getI32Type());
  build(builder, state, logits, ids, x, norm, weight, builder.getF64FloatAttr(eps),
        builder.getF64FloatAttr(offset), builder.getF64FloatAttr(softcap));
}

LogicalResult LmHeadOp::verify() {
  if (failed(checkStaticFeatures(*this, "input", getX())) ||
      failed(checkStaticShape(*this, "norm weight", getNorm())) ||
      failed(checkStaticShape(*this, "weight", getWeight())))
    return failure();
  int64_t features = dimSize(getX().getType(), 1);
  if (int64_t size = dimSize(getNorm().getType(), 0); size != features)
    return emitOpError() << "norm weight has " << size << " elements but input has " << features
                         << " features";
  if (failed(checkPositive(*this, "eps", getEpsAttr().getValue())) ||
      failed(checkSoftcap(*this, "softcap", getSoftcapAttr().getValue())))
    return failure();
  if (!std::isfinite(getOffset().convertToDouble()))
    return emitOpError() << "offset must be finite, got " << getOffset().convertToDouble();
  if (int64_t hidden = dimSize(getWeight().getType(), 1); hidden != features)
    return emitOpError() << "weight has " << hidden << " columns but input has " << features
                         << " features";
  if (failed(checkProjectionResult(*this, getLogits(), "weight", dimSize(getWeight().getType(), 0),
                                   "vocabulary rows", "input", getX())))
    return failure();
  return checkSameTokens(*this, "ids", getIds(), "input", getX());
}

} // namespace llmc::llm

#define GET_OP_CLASSES
#include "ir/LlmOps.cpp.inc"
