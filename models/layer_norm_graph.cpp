#include "models/layer_norm_graph.h"

#include "ir/LlmOps.h"
#include "models/layer_norm_family.h"
#include "models/rope_scaling_graph.h"

#include <mlir/Dialect/Func/IR/FuncOps.h>
#include <mlir/IR/Builders.h>
#include <mlir/IR/Verifier.h>

#include <cmath>
#include <string>

namespace llmc {
namespace {

class LayerNormGraphBuilder {
public:
  LayerNormGraphBuilder(mlir::MLIRContext &context, const ModelConfig &config,
                        const LayerNormNames &names, const GraphOptions &options)
      : b_(&context), c_(config), n_(names), options_(options) {}

  mlir::OwningOpRef<mlir::ModuleOp> build() {
    auto loc = b_.getUnknownLoc();
    mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(loc);
    b_.setInsertionPointToEnd(module->getBody());
    auto ids = mlir::RankedTensorType::get({mlir::ShapedType::kDynamic}, b_.getI32Type());
    auto logitsType = mlir::RankedTensorType::get({mlir::ShapedType::kDynamic, c_.vocabSize},
                                                  b_.getF32Type());
    auto func = b_.create<mlir::func::FuncOp>(loc, "forward",
                                              b_.getFunctionType({ids, ids}, {logitsType}));
    b_.setInsertionPointToStart(func.addEntryBlock());
    mlir::Value tokens = func.getArgument(0);
    positions_ = func.getArgument(1);

    mlir::Value embedTable = matrix(n_.embed + ".weight", c_.vocabSize, c_.hiddenSize);
    mlir::Value x = b_.create<llm::EmbeddingOp>(loc, tokens, embedTable, b_.getF32Type());
    for (int64_t layer = 0; layer < c_.numLayers; ++layer)
      x = block(x, layer);
    mlir::Value normed = layerNorm(x, n_.finalNorm);
    // Tied embeddings: the head reuses the embedding table's value, stored once.
    mlir::Value head = c_.tieWordEmbeddings
                           ? embedTable
                           : matrix(n_.lmHead + ".weight", c_.vocabSize, c_.hiddenSize);
    mlir::Value headBias = c_.layerNorm.lmHeadBias
                               ? vector(n_.lmHead + ".bias", c_.vocabSize)
                               : mlir::Value();
    mlir::Value logits = b_.create<llm::LogitsOp>(loc, normed, head, b_.getF32Type(),
                                                  /*softcap=*/0.0, headBias,
                                                  c_.layerNorm.logitScale);
    b_.create<mlir::func::ReturnOp>(loc, logits);
    return module;
  }

private:
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

  // x [T, H] through the LayerNorm `name` (".weight", and ".bias" when the
  // family's norms have one).
  mlir::Value layerNorm(mlir::Value x, const std::string &name) {
    mlir::Value w = vector(name + ".weight", c_.hiddenSize);
    mlir::Value bias =
        c_.layerNorm.normBias ? vector(name + ".bias", c_.hiddenSize) : mlir::Value();
    return b_.create<llm::LayerNormOp>(b_.getUnknownLoc(), x, w, bias, c_.layerNorm.eps);
  }

  // x [T, heads * D] through layer `layer`'s per-head q or k norm `name`.
  mlir::Value qkNorm(mlir::Value x, int64_t layer, const std::string &name, int64_t heads) {
    const int64_t d = c_.headDim;
    std::string base = layerTensor(n_, layer, name);
    mlir::Value w, bias;
    switch (c_.layerNorm.qkNorm) {
    case LayerNormBlock::QkNorm::None:
      return x;
    case LayerNormBlock::QkNorm::Shared:
      w = vector(base + ".weight", d);
      bias = vector(base + ".bias", d);
      break;
    case LayerNormBlock::QkNorm::PerHead: // one [D] weight per head, as one vector
      w = vector(base + ".weight:heads", heads * d);
      break;
    }
    return b_.create<llm::LayerNormOp>(b_.getUnknownLoc(), x, w, bias, c_.layerNorm.eps, d);
  }

  // x [T, in] -> [T, out] through `weightName` [out, in] (+ `biasName` [out]).
  mlir::Value linear(mlir::Value x, const std::string &weightName, const std::string &biasName,
                     int64_t out, int64_t in, bool bias) {
    mlir::Value b = bias ? vector(biasName, out) : mlir::Value();
    return b_.create<llm::LinearOp>(b_.getUnknownLoc(), x, matrix(weightName, out, in), b);
  }
  mlir::Value linear(mlir::Value x, int64_t layer, const std::string &name, int64_t out,
                     int64_t in, bool bias) {
    return linear(x, layerTensor(n_, layer, name + ".weight"),
                  layerTensor(n_, layer, name + ".bias"), out, in, bias);
  }

  mlir::Value activation(mlir::Value x) {
    auto loc = b_.getUnknownLoc();
    switch (c_.mlpActivation) {
    case MlpActivation::Silu:
      return b_.create<llm::SiluOp>(loc, x);
    case MlpActivation::GeluTanh:
      return b_.create<llm::GeluOp>(loc, x, /*tanh=*/true);
    case MlpActivation::GeluErf:
      return b_.create<llm::GeluOp>(loc, x, /*tanh=*/false);
    }
    return {};
  }

  llm::RopeScalingAttr ropeScaling() {
    return ropeScalingAttr(b_.getContext(), c_.ropeScaling);
  }

  // Partial rotary (StableLM, Phi, GPT-NeoX) rotates the first rotaryDim
  // features of each head; Cohere pairs (2i, 2i + 1).
  mlir::Value rope(mlir::Value x, int64_t heads) {
    const int64_t rotaryDim = c_.rotaryDim == c_.headDim ? 0 : c_.rotaryDim;
    return b_.create<llm::RopeOp>(b_.getUnknownLoc(), x, positions_, heads, c_.headDim,
                                  c_.ropeTheta, ropeScaling(), rotaryDim, c_.ropeInterleaved);
  }

  mlir::Value attention(mlir::Value h, int64_t layer) {
    const int64_t hidden = c_.hiddenSize;
    const int64_t qWidth = c_.numHeads * c_.headDim, kvWidth = c_.numKvHeads * c_.headDim;
    QkvNames qkv = qkvNames(n_, layer);
    mlir::Value q = linear(h, qkv.qWeight, qkv.qBias, qWidth, hidden, c_.attentionBias);
    mlir::Value k = linear(h, qkv.kWeight, qkv.kBias, kvWidth, hidden, c_.attentionBias);
    mlir::Value v = linear(h, qkv.vWeight, qkv.vBias, kvWidth, hidden, c_.attentionBias);
    q = qkNorm(q, layer, n_.qNorm, c_.numHeads);
    k = qkNorm(k, layer, n_.kNorm, c_.numKvHeads);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c_.headDim));
    const int64_t window = c_.layerWindows.empty() ? 0 : c_.layerWindows[layer];
    mlir::Value attn = b_.create<llm::AttentionOp>(
        b_.getUnknownLoc(), rope(q, c_.numHeads), rope(k, c_.numKvHeads), v, layer, c_.numHeads,
        c_.numKvHeads, c_.headDim, scale, /*causal=*/true, /*softcap=*/0.0, window);
    return linear(attn, layer, n_.o, hidden, qWidth, c_.attentionOutputBias);
  }

  // Gated: down(act(gate x) * up x); plain: down(act(up x)).
  mlir::Value mlp(mlir::Value x, int64_t layer) {
    const int64_t h = c_.hiddenSize, inter = c_.intermediateSize;
    const bool bias = c_.layerNorm.mlpBias;
    mlir::Value up = linear(x, layer, n_.up, inter, h, bias);
    mlir::Value act;
    if (c_.layerNorm.gatedMlp) {
      mlir::Value gate = linear(x, layer, n_.gate, inter, h, bias);
      act = b_.create<llm::MulOp>(b_.getUnknownLoc(), activation(gate), up);
    } else {
      act = activation(up);
    }
    return linear(act, layer, n_.down, h, inter, bias);
  }

  mlir::Value block(mlir::Value x, int64_t layer) {
    auto loc = b_.getUnknownLoc();
    mlir::Value h = layerNorm(x, layerTensor(n_, layer, n_.inputNorm));
    mlir::Value attn = attention(h, layer);
    if (c_.layerNorm.parallel) {
      // x + attn(n(x)) + mlp(n'(x)): both branches read the block's input.
      mlir::Value mlpIn =
          c_.layerNorm.sharedNorm ? h : layerNorm(x, layerTensor(n_, layer, n_.mlpNorm));
      mlir::Value sum = b_.create<llm::AddOp>(loc, x, attn);
      return b_.create<llm::AddOp>(loc, sum, mlp(mlpIn, layer));
    }
    x = b_.create<llm::AddOp>(loc, x, attn);
    mlir::Value h2 = layerNorm(x, layerTensor(n_, layer, n_.mlpNorm));
    return b_.create<llm::AddOp>(loc, x, mlp(h2, layer));
  }

  mlir::OpBuilder b_;
  const ModelConfig &c_;
  const LayerNormNames &n_;
  const GraphOptions &options_;
  mlir::Value positions_;
};

} // namespace

Expected<mlir::OwningOpRef<mlir::ModuleOp>> buildLayerNormGraph(mlir::MLIRContext &context,
                                                                const ModelConfig &config,
                                                                const GraphOptions &options) {
  if (!options.matrixType)
    return Status::error("internal: graph options need a matrix element type");
  const LayerNormFamily *family = findLayerNormFamily(config.architecture);
  if (family == nullptr)
    return Status::error("internal: '" + config.architecture + "' is not a LayerNorm family");
  const LayerNormNames names = family->names();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      LayerNormGraphBuilder(context, config, names, options).build();
  if (mlir::failed(mlir::verify(*module)))
    return Status::error("internal: the " + config.architecture +
                         " graph failed IR verification (see the diagnostics above)");
  return module;
}

} // namespace llmc
