#include "models/layer_norm_family.h"

#include "models/config_fields.h"

#include <cmath>

namespace llmc {
namespace {

bool endsWith(const std::string &s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix.data(), suffix.size()) == 0;
}

// Appends the tensors of one layer, in checkpoint order within each module.
class LayerTensors {
public:
  LayerTensors(const LayerNormNames &names, const ModelConfig &config, int64_t layer,
               std::vector<TensorSpec> &specs)
      : n_(names), c_(config), layer_(layer), specs_(specs) {}

  void add(const std::string &name, std::vector<int64_t> shape) {
    specs_.push_back({layerTensor(n_, layer_, name), std::move(shape)});
  }
  // name.weight [out, in] and, with `bias`, name.bias [out].
  void linear(const std::string &name, int64_t out, int64_t in, bool bias) {
    add(name + ".weight", {out, in});
    if (bias)
      add(name + ".bias", {out});
  }
  void norm(const std::string &name) {
    add(name + ".weight", {c_.hiddenSize});
    if (c_.layerNorm.normBias)
      add(name + ".bias", {c_.hiddenSize});
  }
  // The q or k norm over `heads` heads.
  void qkNorm(const std::string &name, int64_t heads) {
    const int64_t d = c_.headDim;
    switch (c_.layerNorm.qkNorm) {
    case LayerNormBlock::QkNorm::None:
      return;
    case LayerNormBlock::QkNorm::Shared:
      add(name + ".weight", {d});
      add(name + ".bias", {d});
      return;
    case LayerNormBlock::QkNorm::PerHead:
      if (!n_.normPerHeadTensors) {
        add(name + ".weight", {heads, d});
        return;
      }
      for (int64_t h = 0; h < heads; ++h)
        add(name + "." + std::to_string(h) + ".weight", {d});
      return;
    }
  }

private:
  const LayerNormNames &n_;
  const ModelConfig &c_;
  int64_t layer_;
  std::vector<TensorSpec> &specs_;
};

// q, k and v of a packed [q_h, k_h, v_h]-per-head tensor (`rows` per head of
// each), as derived tensors named "<packed>:q" ... with `cols` columns (0: a vector).
void splitPacked(const std::string &packed, int64_t heads, int64_t rows, int64_t cols,
                 std::vector<DerivedTensor> &out) {
  const char *parts[] = {"q", "k", "v"};
  for (int part = 0; part < 3; ++part) {
    DerivedTensor d;
    d.name = packed + ":" + parts[part];
    d.shape = {heads * rows};
    if (cols > 0)
      d.shape.push_back(cols);
    for (int64_t h = 0; h < heads; ++h)
      d.pieces.push_back({packed, (3 * h + part) * rows, rows});
    out.push_back(std::move(d));
  }
}

// The per-head q or k norm weights `name` as one vector [heads * headDim]
// named `<name>.weight:heads`: StableLM's one tensor per head,
// `<name>.<h>.weight` [headDim], stacked, or Cohere's [heads, headDim] flattened.
DerivedTensor headNormWeights(const std::string &name, int64_t heads, int64_t headDim,
                              bool perHeadTensors) {
  DerivedTensor d;
  d.name = name + ".weight:heads";
  d.shape = {heads * headDim};
  if (!perHeadTensors) {
    d.pieces.push_back({name + ".weight", 0, heads});
    return d;
  }
  for (int64_t h = 0; h < heads; ++h)
    d.pieces.push_back({name + "." + std::to_string(h) + ".weight", 0, headDim});
  return d;
}

} // namespace

std::string layerTensor(const LayerNormNames &names, int64_t layer, std::string_view suffix) {
  return names.layers + std::to_string(layer) + "." + std::string(suffix);
}

QkvNames qkvNames(const LayerNormNames &names, int64_t layer) {
  auto name = [&](const std::string &proj, const char *kind, const char *part) {
    return names.qkv.empty() ? layerTensor(names, layer, proj + kind)
                             : layerTensor(names, layer, names.qkv + kind + ":" + part);
  };
  return {name(names.q, ".weight", "q"), name(names.k, ".weight", "k"),
          name(names.v, ".weight", "v"), name(names.q, ".bias", "q"),
          name(names.k, ".bias", "k"),   name(names.v, ".bias", "v")};
}

std::vector<TensorSpec> LayerNormFamily::expectedTensors(const ModelConfig &c) const {
  const LayerNormNames n = names();
  const int64_t h = c.hiddenSize, inter = c.intermediateSize, vocab = c.vocabSize;
  const int64_t q = c.numHeads * c.headDim, kv = c.numKvHeads * c.headDim;
  const LayerNormBlock &block = c.layerNorm;
  std::vector<TensorSpec> specs;
  specs.push_back({n.embed + ".weight", {vocab, h}});
  for (int64_t i = 0; i < c.numLayers; ++i) {
    LayerTensors layer(n, c, i, specs);
    layer.norm(n.inputNorm);
    if (!n.qkv.empty()) {
      layer.linear(n.qkv, q + 2 * kv, h, c.attentionBias);
    } else {
      layer.linear(n.q, q, h, c.attentionBias);
      layer.linear(n.k, kv, h, c.attentionBias);
      layer.linear(n.v, kv, h, c.attentionBias);
    }
    layer.qkNorm(n.qNorm, c.numHeads);
    layer.qkNorm(n.kNorm, c.numKvHeads);
    layer.linear(n.o, h, q, c.attentionOutputBias);
    if (!(block.parallel && block.sharedNorm))
      layer.norm(n.mlpNorm);
    if (block.gatedMlp)
      layer.linear(n.gate, inter, h, block.mlpBias);
    layer.linear(n.up, inter, h, block.mlpBias);
    layer.linear(n.down, h, inter, block.mlpBias);
  }
  specs.push_back({n.finalNorm + ".weight", {h}});
  if (block.normBias)
    specs.push_back({n.finalNorm + ".bias", {h}});
  if (!c.tieWordEmbeddings)
    specs.push_back({n.lmHead + ".weight", {vocab, h}});
  if (block.lmHeadBias)
    specs.push_back({n.lmHead + ".bias", {vocab}});
  return specs;
}

std::vector<DerivedTensor> LayerNormFamily::derivedTensors(const ModelConfig &c) const {
  const LayerNormNames n = names();
  std::vector<DerivedTensor> derived;
  for (int64_t i = 0; i < c.numLayers; ++i) {
    // The packed layout interleaves whole heads, so it needs as many kv heads
    // as query heads (the family's config rules ensure it).
    if (!n.qkv.empty()) {
      splitPacked(layerTensor(n, i, n.qkv + ".weight"), c.numHeads, c.headDim, c.hiddenSize,
                  derived);
      if (c.attentionBias)
        splitPacked(layerTensor(n, i, n.qkv + ".bias"), c.numHeads, c.headDim, 0, derived);
    }
    if (c.layerNorm.qkNorm == LayerNormBlock::QkNorm::PerHead) {
      derived.push_back(headNormWeights(layerTensor(n, i, n.qNorm), c.numHeads, c.headDim,
                                        n.normPerHeadTensors));
      derived.push_back(headNormWeights(layerTensor(n, i, n.kNorm), c.numKvHeads, c.headDim,
                                        n.normPerHeadTensors));
    }
  }
  return derived;
}

std::string LayerNormFamily::explainUnusedTensor(const ModelConfig &config,
                                                 const std::string &tensorName) const {
  const LayerNormNames n = names();
  if (tensorName == n.lmHead + ".weight" && config.tieWordEmbeddings)
    return "tie_word_embeddings is true, so the output layer reuses " + n.embed + ".weight";
  if (endsWith(tensorName, "rotary_emb.inv_freq"))
    return "RoPE frequencies are computed from the config's rope parameters";
  if (endsWith(tensorName, ".bias"))
    return "the config declares no bias here";
  return "";
}

const LayerNormFamily *findLayerNormFamily(std::string_view architecture) {
  for (const LayerNormFamily *family :
       {&stableLmForCausalLM(), &starcoder2ForCausalLM(), &cohereForCausalLM(), &phiForCausalLM(),
        &gptNeoXForCausalLM()})
    if (family->name() == architecture)
      return family;
  return nullptr;
}

Status readLayerNormActivation(const Json &hf, const std::string &source,
                               const std::string &fallback, ModelConfig &config) {
  LLMC_ASSIGN_OR_RETURN(config.mlpActivation,
                        readMlpActivation(hf, "hidden_act", fallback, /*geluIsTanh=*/false,
                                          source));
  return Status::ok();
}

Status readLayerNormEps(const Json &hf, const char *key, const std::string &source,
                        ModelConfig &config) {
  LLMC_ASSIGN_OR_RETURN(double eps, optionalNumber(hf, key, 1e-5, source));
  if (!std::isfinite(eps) || eps <= 0)
    return Status::error(source + ": field '" + key + "': expected a finite number > 0, got " +
                         std::to_string(eps));
  config.layerNorm.eps = eps;
  return Status::ok();
}

} // namespace llmc
