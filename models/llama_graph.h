// Builds the `llm` IR of a Llama-layout decoder (Llama 2/3, Mistral, Qwen2,
// Gemma, Gemma2) from its ModelConfig: the only graph code that knows the
// layout (pre-norm blocks, rotate-half RoPE, GQA attention, gated MLP,
// optional q/k/v biases, tied embeddings) and the flags the families set:
// the MLP activation (SwiGLU or GeGLU), (1 + w) RMSNorm, scaled embeddings,
// attention scale, attention and logit soft-capping, per-layer sliding
// windows and Gemma2's sandwich norms.
#pragma once

#include "models/model_config.h"
#include "support/status.h"

#include <mlir/IR/BuiltinOps.h>
#include <mlir/IR/MLIRContext.h>
#include <mlir/IR/OwningOpRef.h>

namespace llmc {

struct GraphOptions {
  // Element type of weight matrices in the plan (f32, f16 or bf16); vectors
  // (norm scales, biases) stay f32. Activations are f32.
  mlir::Type matrixType;
};

// func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>)
//     -> tensor<?x{vocab}xf32>
// The context must have the llm and func dialects loaded.
Expected<mlir::OwningOpRef<mlir::ModuleOp>> buildLlamaGraph(mlir::MLIRContext &context,
                                                            const ModelConfig &config,
                                                            const GraphOptions &options);

} // namespace llmc
