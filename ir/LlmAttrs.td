//===- LlmAttrs.td - llm dialect attributes --------------------*- tablegen -*-===//

#ifndef LLMC_IR_LLMATTRS_TD
#define LLMC_IR_LLMATTRS_TD

include "LlmDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Llm_RopeScalingKind : I32EnumAttr<"RopeScalingKind", "RoPE frequency scaling", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Linear", 1, "linear">,
    I32EnumAttrCase<"Llama3", 2, "llama3">]> {
  let cppNamespace = "::llmc::llm";
  let genSpecializedAttr = 0;
}

// The gated activation of a fused gate/up GEMM: act(x Wg^T) * (x Wu^T).
def Llm_GatedActivation : I32EnumAttr<"GatedActivation", "gated activation of a fused linear", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"SwiGlu", 1, "swiglu">,       // silu(gate) * up
    I32EnumAttrCase<"GeGluTanh", 2, "geglu_tanh">, // gelu_tanh(gate) * up
    I32EnumAttrCase<"GeGluErf", 3, "geglu_erf">]> { // gelu(gate) * up, exact erf form
  let cppNamespace = "::llmc::llm";
}

def Llm_RopeScalingAttr : AttrDef<Llm_Dialect, "RopeScaling"> {
  let mnemonic = "rope_scaling";
  let summary = "How RoPE frequencies are rescaled for long contexts";
  let description = [{
    Mirrors Hugging Face `rope_scaling`:
    - `none`: inv_freq[i] = theta^(-2i/d);
    - `linear`: inv_freq / factor;
    - `llama3`: wavelengths longer than original / low_freq_factor are divided
      by factor, shorter than original / high_freq_factor are kept, and the
      band between is interpolated smoothly (Llama 3.1).
    Only the fields that a kind uses are printed:

    ```
    #llm.rope_scaling<linear, factor = 2.000000e+00>
    #llm.rope_scaling<llama3, factor = 8.000000e+00, low_freq_factor = 1.000000e+00,
                      high_freq_factor = 4.000000e+00, original_max_position_embeddings = 8192>
    ```
  }];
  let parameters = (ins "RopeScalingKind":$kind,
                        APFloatParameter<"">:$factor,
                        APFloatParameter<"">:$lowFreqFactor,
                        APFloatParameter<"">:$highFreqFactor,
                        "int64_t":$originalMaxPositionEmbeddings);
  let builders = [
    AttrBuilder<(ins "RopeScalingKind":$kind, CArg<"double", "1.0">:$factor,
                     CArg<"double", "1.0">:$lowFreqFactor,
                     CArg<"double", "1.0">:$highFreqFactor,
                     CArg<"int64_t", "0">:$originalMaxPositionEmbeddings), [{
      return $_get($_ctxt, kind, ::llvm::APFloat(factor), ::llvm::APFloat(lowFreqFactor),
                   ::llvm::APFloat(highFreqFactor), originalMaxPositionEmbeddings);
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // LLMC_IR_LLMATTRS_TD
