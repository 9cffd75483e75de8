//===- LlmDialect.td - the llm dialect -------------------------*- tablegen -*-===//
//
// The `llm` dialect describes one forward step of a decoder-only language
// model at the granularity the runtime executes: embedding, norms, linear
// layers, RoPE, attention over the paged KV cache, the vocabulary projection.
// See docs/ir.md for the conventions (token dimension, weights by name, dtypes).
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_IR_LLMDIALECT_TD
#define LLMC_IR_LLMDIALECT_TD

include "mlir/IR/OpBase.td"

def Llm_Dialect : Dialect {
  let name = "llm";
  let cppNamespace = "::llmc::llm";
  let summary = "Operations of a transformer language model forward step.";
  let description = [{
    Activations are rank-2 builtin tensors `[tokens, features]`: the token
    dimension is dynamic (all sequences of a step flattened; the runtime knows
    the sequence boundaries), the feature dimension is static. Weights are
    referenced by name through `llm.weight` and carry no data.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  // Folders (fused forms, later) get typed adaptor operands.
  let useFoldAPI = kEmitFoldAdaptorFolder;
  let extraClassDeclaration = [{
    void registerTypes();
    void registerAttributes();
  }];
}

// Every llm op has a C++ verifier: shape relations are checked there, with
// messages that name both sides of a mismatch.
class Llm_Op<string mnemonic, list<Trait> traits = []>
    : Op<Llm_Dialect, mnemonic, traits> {
  let hasVerifier = 1;
}

#endif // LLMC_IR_LLMDIALECT_TD
