// Builds the `llm` IR of a LayerNorm family's decoder (StableLM, Starcoder2,
// Cohere, Phi, GPT-NeoX; models/layer_norm_family.h) from its ModelConfig and
// tensor names: LayerNorm (with or without bias) before attention and MLP,
// sequential or parallel blocks, gated or plain MLPs with or without biases,
// per-head q/k LayerNorms, q/k/v split from a packed projection at import,
// and an lm_head with a bias or a logit scale.
#pragma once

#include "models/llama_graph.h"

namespace llmc {

// func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>)
//     -> tensor<?x{vocab}xf32>
// Fails when config.architecture is not a LayerNorm family.
Expected<mlir::OwningOpRef<mlir::ModuleOp>> buildLayerNormGraph(mlir::MLIRContext &context,
                                                                const ModelConfig &config,
                                                                const GraphOptions &options);

} // namespace llmc
