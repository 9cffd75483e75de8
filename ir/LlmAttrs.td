//===- LlmAttrs.td - llm dialect attributes --------------------*- tablegen -*-===//

#ifndef LLMC_IR_LLMATTRS_TD
#define LLMC_IR_LLMATTRS_TD

include "LlmDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Llm_RopeScalingKind : I32EnumAttr<"RopeScalingKind", "RoPE frequency scaling", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Linear", 1, "linear">,
    I32EnumAttrCase<"Llama3", 2, "llama3">,
    I32EnumAttrCase<"Dynamic", 3, "dynamic">,
    I32EnumAttrCase<"Yarn", 4, "yarn">,
    I32EnumAttrCase<"LongRope", 5, "longrope">]> {
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
    Mirrors Hugging Face `rope_scaling` (the math: runtime/kernels/common/rope.h):
    - `none`: inv_freq[i] = theta^(-2i/d);
    - `linear`: inv_freq / factor;
    - `llama3`: wavelengths longer than original / low_freq_factor are divided
      by factor, shorter than original / high_freq_factor are kept, and the
      band between is interpolated smoothly (Llama 3.1);
    - `dynamic`: NTK: for a forward pass reaching length L past
      original_max_position_embeddings (here: max_position_embeddings) the
      base grows to theta * (factor L / original - (factor - 1))^(d/(d-2));
    - `yarn`: per pair, a ramp between beta_fast and beta_slow rotations
      over the original context blends inv_freq and inv_freq / factor
      (`truncate`: floor/ceil the ramp bounds); cos and sin times
      attention_factor;
    - `longrope`: inv_freq / short_factor[i], or / long_factor[i] for a pass
      reaching past original_max_position_embeddings; cos and sin times
      attention_factor.
    Only the fields that a kind uses are printed:

    ```
    #llm.rope_scaling<linear, factor = 2.000000e+00>
    #llm.rope_scaling<llama3, factor = 8.000000e+00, low_freq_factor = 1.000000e+00,
                      high_freq_factor = 4.000000e+00, original_max_position_embeddings = 8192>
    #llm.rope_scaling<yarn, factor = 4.000000e+00, original_max_position_embeddings = 2048,
                      beta_fast = 3.200000e+01, beta_slow = 1.000000e+00, truncate = true,
                      attention_factor = 1.138629e+00>
    #llm.rope_scaling<longrope, factor = 4.000000e+00, original_max_position_embeddings = 2048,
                      attention_factor = 1.087115e+00, short_factor = [1.0, 1.5],
                      long_factor = [2.0, 8.0]>
    ```
  }];
  let parameters = (ins "RopeScalingKind":$kind,
                        APFloatParameter<"">:$factor,
                        APFloatParameter<"">:$lowFreqFactor,
                        APFloatParameter<"">:$highFreqFactor,
                        "int64_t":$originalMaxPositionEmbeddings,
                        APFloatParameter<"">:$betaFast,
                        APFloatParameter<"">:$betaSlow,
                        "bool":$truncate,
                        APFloatParameter<"">:$attentionFactor,
                        "::mlir::DenseF32ArrayAttr":$shortFactor,
                        "::mlir::DenseF32ArrayAttr":$longFactor);
  let builders = [
    AttrBuilder<(ins "RopeScalingKind":$kind, CArg<"double", "1.0">:$factor,
                     CArg<"double", "1.0">:$lowFreqFactor,
                     CArg<"double", "1.0">:$highFreqFactor,
                     CArg<"int64_t", "0">:$originalMaxPositionEmbeddings,
                     CArg<"double", "32.0">:$betaFast,
                     CArg<"double", "1.0">:$betaSlow,
                     CArg<"bool", "true">:$truncate,
                     CArg<"double", "1.0">:$attentionFactor,
                     CArg<"::llvm::ArrayRef<float>", "{}">:$shortFactor,
                     CArg<"::llvm::ArrayRef<float>", "{}">:$longFactor), [{
      return $_get($_ctxt, kind, ::llvm::APFloat(factor), ::llvm::APFloat(lowFreqFactor),
                   ::llvm::APFloat(highFreqFactor), originalMaxPositionEmbeddings,
                   ::llvm::APFloat(betaFast), ::llvm::APFloat(betaSlow), truncate,
                   ::llvm::APFloat(attentionFactor),
                   ::mlir::DenseF32ArrayAttr::get($_ctxt, shortFactor),
                   ::mlir::DenseF32ArrayAttr::get($_ctxt, longFactor));
    }]>
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // LLMC_IR_LLMATTRS_TD
