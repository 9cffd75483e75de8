//===- LlmOps.td - llm dialect operations ----------------------*- tablegen -*-===//
//
// One record per op. Shapes: T = tokens of the step (dynamic), H = hidden
// size, V = vocabulary size, K/N = input/output features of a linear layer.
// Type constraints here check rank and dtype; the C++ verifiers in LlmOps.cpp
// check how the shapes relate. Weights keep the dtype they are stored in;
// activations carry the compute dtype, so a weight's element type may differ
// from the activation's.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_IR_LLMOPS_TD
#define LLMC_IR_LLMOPS_TD

include "LlmDialect.td"
include "LlmTypes.td"
include "LlmAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

// [T, features]: dynamic token dim, static feature dim (checked in C++).
def Llm_Activation : 2DTensorOf<[F32, F16, BF16]>;
// [T] token ids or positions.
def Llm_TokenIds : 1DTensorOf<[I32]>;
def Llm_FloatVector : 1DTensorOf<[F32, F16, BF16]>;
def Llm_FloatMatrix : 2DTensorOf<[F32, F16, BF16]>;
def Llm_LinearWeight : AnyTypeOf<[Llm_FloatMatrix, Llm_Q4Type]>;
def Llm_WeightType : AnyTypeOf<[RankedTensorOf<[F32, F16, BF16]>, Llm_Q4Type]>;
// A LayerNorm scale or bias: [H], [group], or [heads, group] (checked in C++).
def Llm_NormScale : RankedTensorOf<[F32, F16, BF16]>;

// The paged KV cache of the model: attention appends to it and reads it.
def Llm_KVCache : Resource<"::llmc::llm::KVCacheResource">;

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

def Llm_WeightOp : Llm_Op<"weight", [Pure]> {
  let summary = "Refers to a named model weight; holds no data.";
  let description = [{
    The result type gives shape and dtype; the name is the tensor's name in
    the checkpoint (for `!llm.q4`, the name the quantizer gave it). Two
    `llm.weight` ops with the same name and type are the same value (CSE
    merges them); a tied lm_head is a second use of the embedding's value.

    ```
    %w = llm.weight "model.layers.0.self_attn.q_proj.weight" : tensor<4096x4096xbf16>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Llm_WeightType:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Layers
//===----------------------------------------------------------------------===//

def Llm_EmbeddingOp : Llm_Op<"embedding", [Pure]> {
  let summary = "Gathers one table row per token: [T] x [V, H] -> [T, H].";
  let description = [{
    The result element type is the compute dtype chosen by the graph builder.
    With `scale s` (default 1: not printed) each row is multiplied by s, in
    f32 (Gemma's sqrt(hidden), which the graph builder rounds as the
    reference implementation does).

    ```
    %h = llm.embedding %tokens, %table : tensor<?xi32>, tensor<32000x4096xbf16> -> tensor<?x4096xbf16>
    %g = llm.embedding %tokens, %table scale 4.800000e+01 : tensor<?xi32>, tensor<256000x2304xbf16> -> tensor<?x2304xbf16>
    ```
  }];
  let arguments = (ins Llm_TokenIds:$tokens, Llm_FloatMatrix:$table,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs Llm_Activation:$result);
  let assemblyFormat = [{
    $tokens `,` $table (`scale` $scale^)? attr-dict `:` type($tokens) `,` type($table) `->` type($result)
  }];
  let builders = [
    // Result [T, H] with the given compute element type.
    OpBuilder<(ins "::mlir::Value":$tokens, "::mlir::Value":$table,
                   "::mlir::Type":$elementType, CArg<"double", "1.0">:$scale)>
  ];
}

def Llm_RmsNormOp : Llm_Op<"rms_norm", [Pure]> {
  let summary = "x / sqrt(mean(x^2) + eps) * (offset + weight) over the feature dim: [T, H] -> [T, H].";
  let description = [{
    Computed in f32. `offset` defaults to 0 (not printed); Gemma stores
    weight - 1 and normalizes with offset 1, i.e. (1 + w). With `group g`
    (default 0: the whole row, not printed) each run of g consecutive
    features is normalized on its own with the same g-element weight: the
    per-head q/k norms of Qwen3, Gemma3 and EXAONE 4 (g = head_dim).

    ```
    %n = llm.rms_norm %x, %w eps 1.000000e-05 : tensor<?x4096xbf16>, tensor<4096xbf16>
    %g = llm.rms_norm %x, %w eps 1.000000e-06 offset 1.000000e+00 : tensor<?x2304xbf16>, tensor<2304xbf16>
    %q = llm.rms_norm %q0, %wq eps 1.000000e-06 group 128 : tensor<?x4096xf32>, tensor<128xf32>
    ```
  }];
  let arguments = (ins Llm_Activation:$x, Llm_FloatVector:$weight, F64Attr:$eps,
                       DefaultValuedAttr<F64Attr, "0.0">:$offset,
                       DefaultValuedAttr<I64Attr, "0">:$group);
  let results = (outs Llm_Activation:$result);
  let assemblyFormat = [{
    $x `,` $weight `eps` $eps (`offset` $offset^)? (`group` $group^)? attr-dict `:` type($x) `,`
    custom<WithResultType>(ref(type($x)), type($weight), type($result))
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$x, "::mlir::Value":$weight, "double":$eps,
                   CArg<"double", "0.0">:$offset, CArg<"int64_t", "0">:$group)>
  ];
  let extraClassDeclaration = [{
    /// Features normalized together: `group`, or the whole row when 0.
    int64_t getGroupWidth();
  }];
}

def Llm_LayerNormOp : Llm_Op<"layer_norm", [Pure]> {
  let summary = "(x - mean) / sqrt(var + eps) * weight (+ bias) over each group of features: [T, H] -> [T, H].";
  let description = [{
    HF nn.LayerNorm (biased variance, computed in f32). With `group g`
    (default 0: the whole row, not printed) each run of g consecutive
    features is normalized on its own: the per-head q/k norms of Cohere,
    Phi and StableLM (g = head_dim). `weight` and `bias` hold one value per
    feature (H elements: Cohere's [heads, head_dim] q_norm, or a [H] vector)
    or one per feature of a group (g elements, shared by every group: Phi's
    q_layernorm). Without `bias` nothing is added (Cohere, OLMo-style
    LayerNorm without bias).

    ```
    %n = llm.layer_norm %x, %w, %b eps 1.000000e-05 : tensor<?x2560xf32>, tensor<2560xf32>, tensor<2560xf32> -> tensor<?x2560xf32>
    %q = llm.layer_norm %q0, %wq eps 1.000000e-05 group 128 : tensor<?x8192xf32>, tensor<64x128xf32> -> tensor<?x8192xf32>
    ```
  }];
  let arguments = (ins Llm_Activation:$x, Llm_NormScale:$weight, Optional<Llm_NormScale>:$bias,
                       F64Attr:$eps, DefaultValuedAttr<I64Attr, "0">:$group);
  let results = (outs Llm_Activation:$result);
  let assemblyFormat = [{
    $x `,` $weight (`,` $bias^)? `eps` $eps (`group` $group^)? attr-dict `:` type($x) `,`
    type($weight) (`,` type($bias)^)? `->` type($result)
  }];
  let builders = [
    // Result type = x's. `bias` may be null; `group` 0 normalizes whole rows.
    OpBuilder<(ins "::mlir::Value":$x, "::mlir::Value":$weight, "::mlir::Value":$bias,
                   "double":$eps, CArg<"int64_t", "0">:$group)>
  ];
  let extraClassDeclaration = [{
    /// Features normalized together: `group`, or the whole row when 0.
    int64_t getGroupWidth();
  }];
}

def Llm_LinearOp : Llm_Op<"linear", [Pure]> {
  let summary = "x * weight^T (+ bias): [T, K] x [N, K] (+ [N]) -> [T, N].";
  let description = [{
    The weight is a float matrix or an `!llm.q4<NxK, group = G>`.

    ```
    %y = llm.linear %x, %w, %b : tensor<?x896xf32>, tensor<128x896xf32>, tensor<128xf32> -> tensor<?x128xf32>
    %z = llm.linear %x, %q : tensor<?x4096xf16>, !llm.q4<4096x4096, group = 128> -> tensor<?x4096xf16>
    ```
  }];
  let arguments = (ins Llm_Activation:$x, Llm_LinearWeight:$weight,
                       Optional<Llm_FloatVector>:$bias,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs Llm_Activation:$result);
  let assemblyFormat = [{
    $x `,` $weight (`,` $bias^)? (`scale` $scale^)? attr-dict `:` type($x) `,` type($weight)
    (`,` type($bias)^)? `->` type($result)
  }];
  let builders = [
    // Result [T, N] with x's element type; `scale` s (default 1: not
    // printed) multiplies the result: s * (x W^T + b) (Granite's
    // residual_multiplier on o_proj and down_proj, before the residual add).
    OpBuilder<(ins "::mlir::Value":$x, "::mlir::Value":$weight,
                   CArg<"::mlir::Value", "{}">:$bias, CArg<"double", "1.0">:$scale)>
  ];
}

def Llm_RopeOp : Llm_Op<"rope", [Pure]> {
  let summary = "Rotary position embedding, per head: [T, heads * head_dim] -> same.";
  let description = [{
    Hugging Face rotate_half convention: within each head, element i is
    rotated with element i + head_dim / 2 by angle position * inv_freq[i],
    inv_freq[i] = theta^(-2i / head_dim), rescaled by `scaling` when present
    (absent means no scaling). `rotary_dim` d < head_dim (partial rotary)
    rotates the first d features only, as pairs (i, i + d / 2) with
    inv_freq[i] = theta^(-2i / d); `interleaved` pairs (2i, 2i + 1) instead
    (GPT-J, Cohere).

    ```
    %q2 = llm.rope %q, %positions num_heads 32 head_dim 128 theta 5.000000e+05
            scaling <llama3, factor = 8.000000e+00, low_freq_factor = 1.000000e+00,
                     high_freq_factor = 4.000000e+00, original_max_position_embeddings = 8192>
            : tensor<?x4096xbf16>, tensor<?xi32>
    ```
  }];
  let arguments = (ins Llm_Activation:$x, Llm_TokenIds:$positions,
                       I64Attr:$num_heads, I64Attr:$head_dim, F64Attr:$theta,
                       OptionalAttr<Llm_RopeScalingAttr>:$scaling,
                       DefaultValuedAttr<I64Attr, "0">:$rotary_dim,
                       UnitAttr:$interleaved);
  let results = (outs Llm_Activation:$result);
  let assemblyFormat = [{
    $x `,` $positions `num_heads` $num_heads `head_dim` $head_dim `theta` $theta
    (`scaling` $scaling^)? (`rotary_dim` $rotary_dim^)? (`interleaved` $interleaved^)?
    attr-dict `:` type($x) `,`
    custom<WithResultType>(ref(type($x)), type($positions), type($result))
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$x, "::mlir::Value":$positions, "int64_t":$numHeads,
                   "int64_t":$headDim, "double":$theta,
                   CArg<"RopeScalingAttr", "{}">:$scaling, CArg<"int64_t", "0">:$rotaryDim,
                   CArg<"bool", "false">:$interleaved)>
  ];
  let extraClassDeclaration = [{
    /// The scaling kind, None when the attribute is absent.
    RopeScalingKind getScalingKind();
    /// Features rotated per head (rotary_dim, or head_dim when it is 0).
    int64_t getRotatedFeatures();
  }];
}

def Llm_AttentionOp : Llm_Op<"attention",
    [MemoryEffects<[MemRead<Llm_KVCache>, MemWrite<Llm_KVCache>]>]> {
  let summary = "Appends this step's k/v to a layer's KV cache and attends over it.";
  let description = [{
    q: [T, num_heads * head_dim], k and v: [T, num_kv_heads * head_dim]
    (grouped-query attention: query head h reads kv head h / (num_heads /
    num_kv_heads)). Each token attends to the cached tokens of its own
    sequence up to its own position when `causal` is set. The cache write is
    a side effect on the KV cache resource, so the op is never removed or
    merged even when its result is unused.

    Scores are q.k * `scale`; with `softcap c` (default 0: off, not
    printed) they become c * tanh(score / c) before the mask. With `window w`
    (default 0: off) a query at position p sees only keys at positions j with
    p - w < j <= p (a sliding window of w tokens, itself included).

    ```
    %o = llm.attention %q, %k, %v layer 0 num_heads 32 num_kv_heads 8 head_dim 128
           scale 8.838835e-02 causal : tensor<?x4096xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>
    %w = llm.attention %q, %k, %v layer 0 num_heads 8 num_kv_heads 4 head_dim 256
           scale 6.250000e-02 causal softcap 5.000000e+01 window 4096
           : tensor<?x2048xbf16>, tensor<?x1024xbf16>, tensor<?x1024xbf16>
    ```
  }];
  let arguments = (ins Llm_Activation:$q, Llm_Activation:$k, Llm_Activation:$v,
                       I64Attr:$layer, I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       I64Attr:$head_dim, F64Attr:$scale, UnitAttr:$causal,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap,
                       DefaultValuedAttr<I64Attr, "0">:$window);
  let results = (outs Llm_Activation:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v `layer` $layer `num_heads` $num_heads `num_kv_heads` $num_kv_heads
    `head_dim` $head_dim `scale` $scale (`causal` $causal^)? (`softcap` $softcap^)?
    (`window` $window^)? attr-dict
    `:` type($q) `,` type($k) `,` custom<WithResultType>(ref(type($q)), type($v), type($result))
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$q, "::mlir::Value":$k, "::mlir::Value":$v,
                   "int64_t":$layer, "int64_t":$numHeads, "int64_t":$numKvHeads,
                   "int64_t":$headDim, "double":$scale, "bool":$causal,
                   CArg<"double", "0.0">:$softcap, CArg<"int64_t", "0">:$window)>
  ];
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Llm_BinaryOp<string mnemonic, string formula, list<Trait> traits = []>
    : Llm_Op<mnemonic, !listconcat([Pure, Commutative], traits)> {
  let summary = "Elementwise " # formula # " of two activations of the same type.";
  let arguments = (ins Llm_Activation:$lhs, Llm_Activation:$rhs);
  let results = (outs Llm_Activation:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` custom<BinaryTypes>(type($lhs), type($rhs), type($result))
  }];
  let builders = [OpBuilder<(ins "::mlir::Value":$lhs, "::mlir::Value":$rhs), [{
    build($_builder, $_state, lhs.getType(), lhs, rhs);
  }]>];
}

def Llm_AddOp : Llm_BinaryOp<"add", "lhs + rhs">;
def Llm_MulOp : Llm_BinaryOp<"mul", "lhs * rhs">;

def Llm_SiluOp : Llm_Op<"silu", [Pure]> {
  let summary = "Elementwise x * sigmoid(x).";
  let arguments = (ins Llm_Activation:$x);
  let results = (outs Llm_Activation:$result);
  let assemblyFormat = [{
    $x attr-dict `:` custom<WithResultType>(type($x), type($result))
  }];
  let builders = [OpBuilder<(ins "::mlir::Value":$x), [{
    build($_builder, $_state, x.getType(), x);
  }]>];
}

def Llm_GeluOp : Llm_Op<"gelu", [Pure]> {
  let summary = "Elementwise GELU: exact (erf), or the tanh approximation with `tanh`.";
  let arguments = (ins Llm_Activation:$x, UnitAttr:$tanh);
  let results = (outs Llm_Activation:$result);
  let assemblyFormat = [{
    $x (`tanh` $tanh^)? attr-dict `:` custom<WithResultType>(type($x), type($result))
  }];
  let builders = [OpBuilder<(ins "::mlir::Value":$x, CArg<"bool", "false">:$tanh), [{
    build($_builder, $_state, x.getType(), x, tanh);
  }]>];
}

//===----------------------------------------------------------------------===//
// Output
//===----------------------------------------------------------------------===//

def Llm_LogitsOp : Llm_Op<"logits", [Pure]> {
  let summary = "Projects hidden states onto the vocabulary: [T, H] x [V, H] -> [T, V].";
  let description = [{
    Kept apart from `llm.linear` so that later passes can fuse the final
    norm, this projection and sampling, and decide whether logits are
    materialized at all. The result element type is the output dtype. With
    `softcap c` (default 0: off, not printed) each logit l becomes
    c * tanh(l / c) (Gemma 2's final-logit soft-capping). With a `bias`
    [V] (Phi's lm_head.bias) it is added to each row first, and with
    `scale s` (default 1: not printed; Cohere's logit_scale) the logits are
    multiplied by s before the soft-cap: logits = softcap((x W^T + b) * s).

    ```
    %l = llm.logits %h, %w : tensor<?x4096xbf16>, tensor<128256x4096xbf16> -> tensor<?x128256xf32>
    %c = llm.logits %h, %w softcap 3.000000e+01 : tensor<?x2304xbf16>, tensor<256000x2304xbf16> -> tensor<?x256000xf32>
    %p = llm.logits %h, %w, %b : tensor<?x2048xf32>, tensor<51200x2048xf32>, tensor<51200xf32> -> tensor<?x51200xf32>
    %s = llm.logits %h, %w scale 6.250000e-02 : tensor<?x8192xf32>, tensor<256000x8192xf32> -> tensor<?x256000xf32>
    ```
  }];
  let arguments = (ins Llm_Activation:$x, Llm_FloatMatrix:$weight,
                       Optional<Llm_FloatVector>:$bias,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap);
  let results = (outs Llm_Activation:$result);
  let assemblyFormat = [{
    $x `,` $weight (`,` $bias^)? (`scale` $scale^)? (`softcap` $softcap^)? attr-dict `:` type($x)
    `,` type($weight) (`,` type($bias)^)? `->` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$x, "::mlir::Value":$weight,
                   "::mlir::Type":$elementType, CArg<"double", "0.0">:$softcap,
                   CArg<"::mlir::Value", "{}">:$bias, CArg<"double", "1.0">:$scale)>
  ];
  let extraClassDeclaration = [{
    /// Whether the logits are exactly x W^T, soft-capped: no bias, scale 1.
    bool isPlainProjection();
  }];
}

//===----------------------------------------------------------------------===//
// Fused forms: produced by the fusion passes (passes/Fuse*.cpp), each lowered
// to one step of the engine program. Their meaning is spelled out in terms of
// the unfused ops, which is what the passes replace.
//===----------------------------------------------------------------------===//

def Llm_FusedLinearOp : Llm_Op<"fused_linear", [Pure, AttrSizedOperandSegments]> {
  let summary = "One GEMM over the row-concatenated weights, with an optional RMSNorm "
                "prologue and a gated (SwiGLU, GeGLU) or residual epilogue.";
  let description = [{
    x: [T, K]; weights W_i: [N_i, K], float matrices of one dtype or
    `!llm.q4` of one group size (the plan stores them as one [sum N_i, K]
    tensor, or one set of int4 parts); biases, when present, one [N_i] per
    weight.

    - `norm %g eps e`: x is first normalized, as `llm.rms_norm %x, %g eps e`
      (with `norm_offset o`, default 0, as `llm.rms_norm ... offset o`).
    - Without a gated activation, result i is `llm.linear x, W_i (, b_i)`:
      [T, N_i] (the q/k/v projections as one GEMM).
    - `swiglu`, `geglu_tanh`, `geglu_erf` (two weights of equal N, no
      biases): one result `act(x W_0^T) * (x W_1^T)`: [T, N] (gate and up
      projections), act = silu, `llm.gelu tanh` or `llm.gelu`.
    - `scale s` (one ungated result; default 1, not printed): the product
      (with its bias) is multiplied by s before the residual add, as
      `llm.linear ... scale s`.
    - `residual %r` (one result): the result is `r + ...` (the residual add
      of o_proj and down_proj); codegen updates r's buffer in place, so r
      must not be used after this op.

    ```
    %q, %k, %v = llm.fused_linear %x, [%wq, %wk, %wv] norm %g eps 1.000000e-05
        : tensor<?x64xf32>, [tensor<64x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>] norm tensor<64xf32>
        -> tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
    %a = llm.fused_linear %y, [%wg, %wu] swiglu
        : tensor<?x64xf32>, [tensor<160x64xf32>, tensor<160x64xf32>] -> tensor<?x160xf32>
    %h = llm.fused_linear %a, [%wd] residual %x
        : tensor<?x160xf32>, [tensor<64x160xf32>] residual tensor<?x64xf32> -> tensor<?x64xf32>
    ```
  }];
  let arguments = (ins Llm_Activation:$x, Variadic<Llm_LinearWeight>:$weights,
                       Variadic<Llm_FloatVector>:$biases, Optional<Llm_FloatVector>:$norm,
                       Optional<Llm_Activation>:$residual, OptionalAttr<F64Attr>:$eps,
                       DefaultValuedAttr<F64Attr, "0.0">:$norm_offset,
                       DefaultValuedAttr<Llm_GatedActivation,
                                         "::llmc::llm::GatedActivation::None">:$activation,
                       DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs Variadic<Llm_Activation>:$results);
  let assemblyFormat = [{
    $x `,` `[` $weights `]` (`bias` ` ` `[` $biases^ `]`)? (`norm` $norm^)? (`eps` $eps^)?
    (`norm_offset` $norm_offset^)? (`residual` $residual^)? custom<Gated>($activation)
    (`scale` $scale^)? attr-dict
    `:` type($x) `,` `[` type($weights) `]` (`bias` ` ` `[` type($biases)^ `]`)?
    (`norm` type($norm)^)? (`residual` type($residual)^)? `->` type($results)
  }];
  let builders = [
    // Result types from x and the weights: one [T, N_i] per weight, or one
    // [T, N] when gated. `eps` and `normOffset` are read only with a norm weight.
    OpBuilder<(ins "::mlir::Value":$x, "::mlir::ValueRange":$weights,
                   "::mlir::ValueRange":$biases, "::mlir::Value":$norm, "double":$eps,
                   "::mlir::Value":$residual, "GatedActivation":$activation,
                   CArg<"double", "0.0">:$normOffset, CArg<"double", "1.0">:$scale)>
  ];
  let extraClassDeclaration = [{
    /// Whether the op has a gated activation (one result from gate and up).
    bool isGated() { return getActivation() != GatedActivation::None; }
  }];
}

def Llm_RopeAttentionOp : Llm_Op<"rope_attention",
    [MemoryEffects<[MemRead<Llm_KVCache>, MemWrite<Llm_KVCache>]>]> {
  let summary = "RoPE of q and k, the KV-cache append and attention in one op.";
  let description = [{
    Equal to `llm.attention (llm.rope %q), (llm.rope %k), %v` with the rope
    attributes (theta, scaling, rotary_dim, interleaved) shared by q and k: the rotated k goes straight
    into the cache and the rotated q never leaves the kernel. `softcap` and
    `window` as in `llm.attention`.

    ```
    %o = llm.rope_attention %q, %k, %v, %positions layer 0 num_heads 4 num_kv_heads 2 head_dim 16
           theta 1.000000e+04 scale 2.500000e-01 causal
           : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?xi32>
    ```
  }];
  let arguments = (ins Llm_Activation:$q, Llm_Activation:$k, Llm_Activation:$v,
                       Llm_TokenIds:$positions, I64Attr:$layer, I64Attr:$num_heads,
                       I64Attr:$num_kv_heads, I64Attr:$head_dim, F64Attr:$theta,
                       OptionalAttr<Llm_RopeScalingAttr>:$scaling, F64Attr:$scale,
                       UnitAttr:$causal, DefaultValuedAttr<F64Attr, "0.0">:$softcap,
                       DefaultValuedAttr<I64Attr, "0">:$window,
                       DefaultValuedAttr<I64Attr, "0">:$rotary_dim,
                       UnitAttr:$interleaved);
  let results = (outs Llm_Activation:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $positions `layer` $layer `num_heads` $num_heads
    `num_kv_heads` $num_kv_heads `head_dim` $head_dim `theta` $theta (`scaling` $scaling^)?
    (`rotary_dim` $rotary_dim^)? (`interleaved` $interleaved^)?
    `scale` $scale (`causal` $causal^)? (`softcap` $softcap^)? (`window` $window^)? attr-dict
    `:` type($q) `,` type($k) `,` type($v) `,`
    custom<WithResultType>(ref(type($q)), type($positions), type($result))
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$q, "::mlir::Value":$k, "::mlir::Value":$v,
                   "::mlir::Value":$positions, "int64_t":$layer, "int64_t":$numHeads,
                   "int64_t":$numKvHeads, "int64_t":$headDim, "double":$theta,
                   "RopeScalingAttr":$scaling, "double":$scale, "bool":$causal,
                   CArg<"double", "0.0">:$softcap, CArg<"int64_t", "0">:$window,
                   CArg<"int64_t", "0">:$rotaryDim, CArg<"bool", "false">:$interleaved)>
  ];
}

def Llm_LmHeadOp : Llm_Op<"lm_head", [Pure]> {
  let summary = "Final RMSNorm, vocabulary projection and greedy argmax in one op.";
  let description = [{
    logits = `llm.logits (llm.rms_norm %x, %norm eps e offset o), %weight
    softcap c`: [T, V] (`offset`, `softcap` default 0, not printed);
    ids[t] = the index of the largest logit of row t (the first on ties):
    [T] i32. The runtime asks for one or the other: a greedy decode step
    takes the ids and never writes the logits.

    ```
    %logits, %ids = llm.lm_head %x, %g, %w eps 1.000000e-05
        : tensor<?x64xf32>, tensor<64xf32>, tensor<512x64xf32> -> tensor<?x512xf32>, tensor<?xi32>
    ```
  }];
  let arguments = (ins Llm_Activation:$x, Llm_FloatVector:$norm, Llm_FloatMatrix:$weight,
                       F64Attr:$eps, DefaultValuedAttr<F64Attr, "0.0">:$offset,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap);
  let results = (outs Llm_Activation:$logits, Llm_TokenIds:$ids);
  let assemblyFormat = [{
    $x `,` $norm `,` $weight `eps` $eps (`offset` $offset^)? (`softcap` $softcap^)? attr-dict `:` type($x) `,` type($norm) `,`
    type($weight) `->` type($logits) `,` type($ids)
  }];
  let builders = [
    // Logits [T, V] f32 and ids [T] i32.
    OpBuilder<(ins "::mlir::Value":$x, "::mlir::Value":$norm, "::mlir::Value":$weight,
                   "double":$eps, CArg<"double", "0.0">:$offset, CArg<"double", "0.0">:$softcap)>
  ];
}

#endif // LLMC_IR_LLMOPS_TD
