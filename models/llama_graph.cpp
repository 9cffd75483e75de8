#include "models/llama_graph.h"
#include "models/rope_scaling_graph.h"

#include "ir/LlmOps.h"

#include <llvm/ADT/APFloat.h>
#include <mlir/Dialect/Func/IR/FuncOps.h>
#include <mlir/IR/Builders.h>
#include <mlir/IR/Verifier.h>

#include <cmath>
#include <string>

namespace llmc {
namespace {

class LlamaGraphBuilder {
public:
  LlamaGraphBuilder(mlir::MLIRContext &context, const ModelConfig &config,
                    const GraphOptions &options)
      : b_(&context), config_(config), options_(options) {}

  mlir::OwningOpRef<mlir::ModuleOp> build() {
    auto loc = b_.getUnknownLoc();
    mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(loc);
    b_.setInsertionPointToEnd(module->getBody());
    auto ids = mlir::RankedTensorType::get({mlir::ShapedType::kDynamic}, b_.getI32Type());
    auto logitsType = activationType(config_.vocabSize);
    auto func = b_.create<mlir::func::FuncOp>(loc, "forward",
                                              b_.getFunctionType({ids, ids}, {logitsType}));
    b_.setInsertionPointToStart(func.addEntryBlock());
    mlir::Value tokens = func.getArgument(0);
    positions_ = func.getArgument(1);

    mlir::Value embedTable = matrix("model.embed_tokens.weight", config_.vocabSize,
                                    config_.hiddenSize);
    mlir::Type compute = b_.getF32Type();
    mlir::Value x = b_.create<llm::EmbeddingOp>(
        loc, tokens, embedTable, compute, roundedTo(config_.embeddingScale, compute));
    for (int64_t layer = 0; layer < config_.numLayers; ++layer)
      x = decoderLayer(x, layer);
    mlir::Value normed = rmsNorm(x, "model.norm.weight");
    // Tied embeddings: the head reuses the embedding table's value, stored once.
    mlir::Value head = config_.tieWordEmbeddings
                           ? embedTable
                           : matrix("lm_head.weight", config_.vocabSize, config_.hiddenSize);
    mlir::Value logits = b_.create<llm::LogitsOp>(loc, normed, head, b_.getF32Type(),
                                                  config_.finalLogitSoftcap, mlir::Value(),
                                                  config_.logitScale);
    b_.create<mlir::func::ReturnOp>(loc, logits);
    return module;
  }

private:
  mlir::RankedTensorType activationType(int64_t width) {
    return mlir::RankedTensorType::get({mlir::ShapedType::kDynamic, width}, b_.getF32Type());
  }

  mlir::Value weight(const std::string &name, llvm::ArrayRef<int64_t> shape, mlir::Type element) {
    auto type = mlir::RankedTensorType::get(shape, element);
    return b_.create<llm::WeightOp>(b_.getUnknownLoc(), type, b_.getStringAttr(name));
  }
  mlir::Value matrix(const std::string &name, int64_t rows, int64_t cols) {
    return weight(name, {rows, cols}, options_.matrixType);
  }
  mlir::Value vector(const std::string &name, int64_t size) {
    return weight(name, {size}, b_.getF32Type());
  }

  // HF computes constants such as Gemma's sqrt(hidden) in the activations'
  // dtype (torch.tensor(value, dtype=hidden_states.dtype)): so does the plan.
  static double roundedTo(double value, mlir::Type type) {
    llvm::APFloat rounded(value);
    bool lost = false;
    rounded.convert(llvm::cast<mlir::FloatType>(type).getFloatSemantics(),
                    llvm::APFloat::rmNearestTiesToEven, &lost);
    return rounded.convertToDouble();
  }

  mlir::Value rmsNorm(mlir::Value x, const std::string &weightName) {
    return b_.create<llm::RmsNormOp>(b_.getUnknownLoc(), x,
                                     vector(weightName, config_.hiddenSize), config_.rmsNormEps,
                                     config_.normOffset);
  }

  // The q or k norm of `projection` ([T, heads * D]) under `prefix`, when the family has one.
  mlir::Value qkNorm(mlir::Value projection, const std::string &weightName, int64_t heads) {
    const int64_t d = config_.headDim;
    switch (config_.qkNorm) {
    case QkNorm::None:
      return projection;
    case QkNorm::PerHead:
      return b_.create<llm::RmsNormOp>(b_.getUnknownLoc(), projection, vector(weightName, d),
                                       config_.rmsNormEps, config_.normOffset, /*group=*/d);
    case QkNorm::Full:
      return b_.create<llm::RmsNormOp>(b_.getUnknownLoc(), projection,
                                       vector(weightName, heads * d), config_.rmsNormEps,
                                       config_.normOffset);
    }
    return projection;
  }

  // act(gate) for the family's MLP activation.
  mlir::Value activation(mlir::Value gate) {
    auto loc = b_.getUnknownLoc();
    switch (config_.mlpActivation) {
    case MlpActivation::Silu:
      return b_.create<llm::SiluOp>(loc, gate);
    case MlpActivation::GeluTanh:
      return b_.create<llm::GeluOp>(loc, gate, /*tanh=*/true);
    case MlpActivation::GeluErf:
      return b_.create<llm::GeluOp>(loc, gate, /*tanh=*/false);
    }
    return {};
  }

  int64_t window(int64_t layer) const {
    return config_.layerWindows.empty() ? 0 : config_.layerWindows[layer];
  }

  // x [T, in] -> [T, out] through `<prefix>.weight` [out, in] (+ `<prefix>.bias`),
  // times `scale`.
  mlir::Value linear(mlir::Value x, const std::string &prefix, int64_t out, int64_t in,
                     bool bias = false, double scale = 1.0) {
    mlir::Value b = bias ? vector(prefix + ".bias", out) : mlir::Value();
    return b_.create<llm::LinearOp>(b_.getUnknownLoc(), x, matrix(prefix + ".weight", out, in),
                                    b, scale);
  }

  // `layer`'s RoPE: its own when the family's layers differ (layerRopes).
  LayerRope layerRope(int64_t layer) const {
    if (!config_.layerRopes.empty())
      return config_.layerRopes[layer];
    return LayerRope{true, config_.ropeTheta, config_.ropeScaling};
  }

  // x [T, heads * D] rotated as `layer` rotates; unchanged on a NoPE layer.
  mlir::Value rope(mlir::Value x, int64_t heads, int64_t layer) {
    const LayerRope r = layerRope(layer);
    if (!r.rotates)
      return x;
    int64_t rotaryDim = config_.rotaryDim == config_.headDim ? 0 : config_.rotaryDim;
    return b_.create<llm::RopeOp>(b_.getUnknownLoc(), x, positions_, heads, config_.headDim,
                                  r.theta, ropeScalingAttr(b_.getContext(), r.scaling),
                                  rotaryDim, config_.ropeInterleaved);
  }

  mlir::Value decoderLayer(mlir::Value x, int64_t layer) {
    auto loc = b_.getUnknownLoc();
    const ModelConfig &c = config_;
    std::string p = "model.layers." + std::to_string(layer) + ".";
    int64_t qWidth = c.numHeads * c.headDim, kvWidth = c.numKvHeads * c.headDim;

    mlir::Value h = c.postNormsOnly ? x : rmsNorm(x, p + "input_layernorm.weight");
    mlir::Value q = linear(h, p + "self_attn.q_proj", qWidth, c.hiddenSize, c.attentionBias);
    mlir::Value k = linear(h, p + "self_attn.k_proj", kvWidth, c.hiddenSize, c.attentionBias);
    q = qkNorm(q, p + "self_attn.q_norm.weight", c.numHeads);
    k = qkNorm(k, p + "self_attn.k_norm.weight", c.numKvHeads);
    mlir::Value v = linear(h, p + "self_attn.v_proj", kvWidth, c.hiddenSize, c.attentionBias);
    double scale = c.attentionScale > 0 ? c.attentionScale
                                        : 1.0 / std::sqrt(static_cast<double>(c.headDim));
    mlir::Value attn = b_.create<llm::AttentionOp>(
        loc, rope(q, c.numHeads, layer), rope(k, c.numKvHeads, layer), v, layer, c.numHeads,
        c.numKvHeads, c.headDim, scale, /*causal=*/true, c.attentionSoftcap, window(layer));
    // Granite's residual_multiplier scales both block outputs before their adds.
    mlir::Value o = linear(attn, p + "self_attn.o_proj", c.hiddenSize, qWidth,
                           c.attentionOutputBias, c.residualScale);
    // Sandwich norms (Gemma2): the attention output is normalized before the
    // residual add, and the MLP input by a norm of its own.
    if (c.sandwichNorms || c.postNormsOnly)
      o = rmsNorm(o, p + "post_attention_layernorm.weight");
    x = b_.create<llm::AddOp>(loc, x, o);

    mlir::Value h2 = c.postNormsOnly ? x
                                     : rmsNorm(x, p + (c.sandwichNorms
                                                           ? "pre_feedforward_layernorm.weight"
                                                           : "post_attention_layernorm.weight"));
    mlir::Value gate =
        linear(h2, p + "mlp.gate_proj", c.intermediateSize, c.hiddenSize, c.mlpBias);
    mlir::Value up = linear(h2, p + "mlp.up_proj", c.intermediateSize, c.hiddenSize, c.mlpBias);
    mlir::Value act = b_.create<llm::MulOp>(loc, activation(gate), up);
    mlir::Value down = linear(act, p + "mlp.down_proj", c.hiddenSize, c.intermediateSize,
                              c.mlpBias, c.residualScale);
    if (c.sandwichNorms || c.postNormsOnly)
      down = rmsNorm(down, p + "post_feedforward_layernorm.weight");
    return b_.create<llm::AddOp>(loc, x, down);
  }

  mlir::OpBuilder b_;
  const ModelConfig &config_;
  const GraphOptions &options_;
  mlir::Value positions_;
};

// The RoPE features the config asks for that no Llama-layout family has
// (interleaved pairs), named as the config names them; "" when none.
// Partial rotary (Phi-3's partial_rotary_factor) is the rope op's rotary_dim.
std::string unsupportedRope(const ModelConfig &c) {
  if (c.ropeInterleaved)
    return "interleaved RoPE pairs";
  return "";
}

} // namespace

Expected<mlir::OwningOpRef<mlir::ModuleOp>> buildLlamaGraph(mlir::MLIRContext &context,
                                                            const ModelConfig &config,
                                                            const GraphOptions &options) {
  if (!options.matrixType)
    return Status::error("internal: graph options need a matrix element type");
  if (!config.layerRopes.empty() &&
      static_cast<int64_t>(config.layerRopes.size()) != config.numLayers)
    return Status::error("internal: " + config.architecture + " has " +
                         std::to_string(config.layerRopes.size()) + " per-layer RoPEs for " +
                         std::to_string(config.numLayers) + " layers");
  if (std::string missing = unsupportedRope(config); !missing.empty())
    return Status::error(config.architecture + ": " + missing +
                         " is not supported by this llmc's plans yet; supported RoPE: default, "
                         "linear, llama3, yarn, dynamic, longrope");
  mlir::OwningOpRef<mlir::ModuleOp> module =
      LlamaGraphBuilder(context, config, options).build();
  if (mlir::failed(mlir::verify(*module)))
    return Status::error("internal: the " + config.architecture +
                         " graph failed IR verification (see the diagnostics above)");
  return module;
}

} // namespace llmc
