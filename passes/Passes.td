//===- Passes.td - llmc passes over the llm dialect ------------*- tablegen -*-===//
//
// One record per pass, one passes/<Name>.cpp per record, one lit test
// tests/lit/passes/<name>.mlir per pass. The driver (compiler/driver/build.cpp)
// runs them in stages: prune, fuse, quantize, lower. `llm-opt --llm-<name>`
// runs any of them on a .mlir file.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_PASSES_TD
#define LLMC_PASSES_TD

include "mlir/Pass/PassBase.td"

def LlmPrune : Pass<"llm-prune", "mlir::ModuleOp"> {
  let summary = "Removes the weights and pure ops that no result needs and merges "
                "duplicate weight references.";
  let description = [{
    Three rewrites, in this order, in every block of the module:

    1. `llm.weight` ops with the same name and the same type are one weight:
       every later op is replaced by the first one. The same name with two
       different types is an error (the plan's tensor table is keyed by name).
    2. Ops without side effects whose results are all unused are erased,
       repeatedly, so that a chain feeding only dead ops goes too; unused
       `llm.weight` ops go with them. `llm.attention` writes the KV cache, so
       it stays even when its result is unused.
    3. The weights whose name no op refers to any more are reported with their
       size (elements x dtype), the bytes the plan no longer has to carry.

    With `report=true` the pass says what it removed in one remark; the
    driver prints the same under `llmc build -v`.

    Before:

    ```mlir
    func.func @forward(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
      %w1 = llm.weight "w" : tensor<64x64xf32>
      %w2 = llm.weight "w" : tensor<64x64xf32>
      %a = llm.linear %x, %w1 : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
      %b = llm.linear %x, %w2 : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
      %s = llm.add %a, %b : tensor<?x64xf32>
      %n = llm.weight "unused_norm" : tensor<64xf32>
      %dead = llm.rms_norm %x, %n eps 1.0e-6 : tensor<?x64xf32>, tensor<64xf32>
      return %s : tensor<?x64xf32>
    }
    ```

    After (`unused_norm`, 256 bytes, is no longer needed):

    ```mlir
    func.func @forward(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
      %w1 = llm.weight "w" : tensor<64x64xf32>
      %a = llm.linear %x, %w1 : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
      %b = llm.linear %x, %w1 : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
      %s = llm.add %a, %b : tensor<?x64xf32>
      return %s : tensor<?x64xf32>
    }
    ```

    The two `llm.linear` ops are now identical; `--cse`, which the driver's
    prune stage runs next, merges them.
  }];
  let dependentDialects = ["llmc::llm::LlmDialect"];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark on the module that says what was removed">,
  ];
}

//===----------------------------------------------------------------------===//
// Fusion passes. The driver's fuse stage runs them in this order (each can be
// switched off: `llmc build --no-fuse=qkv,swiglu,head,norm,residual,rope`,
// all of them with -O0). Every one leaves IR that lowers to fewer program
// steps and fewer activation buffers; none changes what is computed.
//===----------------------------------------------------------------------===//

class Llm_FusionPass<string arg, string summ> : Pass<arg, "mlir::ModuleOp"> {
  let summary = summ;
  let dependentDialects = ["llmc::llm::LlmDialect"];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark on the module that says what was fused">,
  ];
}

def LlmFuseQkv : Llm_FusionPass<"llm-fuse-qkv",
    "Merges the q, k and v projections of an attention into one GEMM over "
    "their concatenated weights."> {
  let description = [{
    Fires for an `llm.attention` (or `llm.rope_attention`) whose q, k and v
    come, directly or through an `llm.rope`, from three distinct
    `llm.linear` ops that read the same input, have no other use, use float
    weights of one dtype, and either all or none have a bias (Qwen2 has
    all three). The plan stores the concatenated [Nq + Nk + Nv, K] weight
    (and bias) once; the results are column slices of one buffer.

    Before:

    ```mlir
    %q = llm.linear %x, %wq : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
    %k = llm.linear %x, %wk : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
    %v = llm.linear %x, %wv : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
    %qr = llm.rope %q, %pos num_heads 4 head_dim 16 theta 1.0e4 : tensor<?x64xf32>, tensor<?xi32>
    %kr = llm.rope %k, %pos num_heads 2 head_dim 16 theta 1.0e4 : tensor<?x32xf32>, tensor<?xi32>
    %o = llm.attention %qr, %kr, %v layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
        : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
    ```

    After:

    ```mlir
    %q, %k, %v = llm.fused_linear %x, [%wq, %wk, %wv]
        : tensor<?x64xf32>, [tensor<64x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>]
        -> tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
    %qr = llm.rope %q, ...
    ```

    Not fused: projections of different inputs, a projection whose result
    has another use, k and v that are one value, mixed biases, int4 weights.
  }];
}

def LlmFuseSwiglu : Llm_FusionPass<"llm-fuse-swiglu",
    "Merges the gate and up projections of a SwiGLU or GeGLU MLP into one GEMM "
    "with an act(gate) * up epilogue."> {
  let description = [{
    Fires for `llm.mul (llm.silu %gate), %up` (either operand order) where
    gate and up are bias-free `llm.linear` ops of the same input, with float
    weights of one type, and neither they nor the silu have another use.
    `llm.gelu %gate tanh` and `llm.gelu %gate` in place of the silu (Gemma's
    GeGLU) fuse alike, to `geglu_tanh` and `geglu_erf`.

    Before:

    ```mlir
    %g = llm.linear %y, %wg : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
    %u = llm.linear %y, %wu : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
    %s = llm.silu %g : tensor<?x160xf32>
    %a = llm.mul %s, %u : tensor<?x160xf32>
    ```

    After (the [T, 2 x 160] gate/up product never reaches memory):

    ```mlir
    %a = llm.fused_linear %y, [%wg, %wu] swiglu
        : tensor<?x64xf32>, [tensor<160x64xf32>, tensor<160x64xf32>] -> tensor<?x160xf32>
    ```
  }];
}

def LlmFuseHead : Llm_FusionPass<"llm-fuse-head",
    "Fuses the final RMSNorm, the vocabulary projection and the greedy argmax "
    "into one llm.lm_head."> {
  let description = [{
    Fires when a function returns `llm.logits (llm.rms_norm %x, %g), %w`
    (f32 logits) and neither the norm nor the logits have another use. The
    function then also returns the argmax ids, so that a greedy decode step
    reads [T] ids instead of [T, V] logits; the logits stay available to the
    runtime (perplexity, sampling, --dump-logits).

    Before:

    ```mlir
    %hf = llm.rms_norm %h, %g eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
    %l = llm.logits %hf, %w : tensor<?x64xf32>, tensor<512x64xf32> -> tensor<?x512xf32>
    return %l : tensor<?x512xf32>
    ```

    After:

    ```mlir
    %l, %ids = llm.lm_head %h, %g, %w eps 1.000000e-05
        : tensor<?x64xf32>, tensor<64xf32>, tensor<512x64xf32> -> tensor<?x512xf32>, tensor<?xi32>
    return %l, %ids : tensor<?x512xf32>, tensor<?xi32>
    ```
  }];
}

def LlmFuseNorm : Llm_FusionPass<"llm-fuse-norm",
    "Moves an RMSNorm into the prologue of the GEMMs that consume it."> {
  let description = [{
    Fires for an `llm.rms_norm` whose every use is the input of an
    `llm.linear` with a float weight or of an `llm.fused_linear` without a
    norm: each of them normalizes its input rows itself, and the normalized
    [T, H] activation is never stored. A norm with any other user (an add,
    an attention, a return, the residual of a fused_linear) stays.

    Before:

    ```mlir
    %y = llm.rms_norm %h, %g eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
    %a = llm.fused_linear %y, [%wg, %wu] swiglu : ...
    ```

    After:

    ```mlir
    %a = llm.fused_linear %h, [%wg, %wu] norm %g eps 1.000000e-05 swiglu : ...
    ```
  }];
}

def LlmFuseResidual : Llm_FusionPass<"llm-fuse-residual",
    "Moves a residual add into the epilogue of the GEMM that produces one of "
    "its operands."> {
  let description = [{
    Fires for `llm.add %r, %p` (either order) where %p is the only use of an
    `llm.linear` (float weight) or single-result `llm.fused_linear` without
    a residual or SwiGLU, %r is the single result of an op, is not the GEMM's input,
    and has no use after the add. Codegen then accumulates into %r's buffer
    (read-modify-write: the o_proj and down_proj outputs never reach memory
    on their own, and the residual stream stays in one buffer).

    Before:

    ```mlir
    %o = llm.linear %att, %wo : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
    %h1 = llm.add %h0, %o : tensor<?x64xf32>
    ```

    After:

    ```mlir
    %h1 = llm.fused_linear %att, [%wo] residual %h0
        : tensor<?x64xf32>, [tensor<64x64xf32>] residual tensor<?x64xf32> -> tensor<?x64xf32>
    ```
  }];
}

def LlmFuseRope : Llm_FusionPass<"llm-fuse-rope",
    "Moves the RoPE of q and k and the KV-cache write into the attention "
    "prologue."> {
  let description = [{
    Fires for an `llm.attention` whose q and k are each the only use of an
    `llm.rope` with the same positions, theta and scaling: the rotated q and
    k are never stored as activations (k is rotated as it is written to the
    cache).

    Before:

    ```mlir
    %qr = llm.rope %q, %pos num_heads 4 head_dim 16 theta 1.0e4 : tensor<?x64xf32>, tensor<?xi32>
    %kr = llm.rope %k, %pos num_heads 2 head_dim 16 theta 1.0e4 : tensor<?x32xf32>, tensor<?xi32>
    %o = llm.attention %qr, %kr, %v layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
        : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
    ```

    After:

    ```mlir
    %o = llm.rope_attention %q, %k, %v, %pos layer 0 num_heads 4 num_kv_heads 2 head_dim 16
        theta 1.000000e+04 scale 2.500000e-01 causal
        : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?xi32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Quantization. The driver runs it after prune and before fuse (fusion
// patterns then see the int4 linears); the data behind the names it writes
// comes from compiler/quantize/ (calibration, AWQ search, packing).
//===----------------------------------------------------------------------===//

def LlmQuantize : Pass<"llm-quantize", "mlir::ModuleOp"> {
  let summary = "Turns the weights of llm.linear ops into int4 (!llm.q4) and, for AWQ, "
                "renames the weights that absorb the activation-aware scales.";
  let description = [{
    Every `llm.linear` with a float weight `<p>.weight : tensor<NxKx..>` gets
    `llm.weight "<p>" : !llm.q4<NxK, group = G>` (asymmetric int4, an f16
    scale and zero per row and group of G input columns; the last group may
    be shorter). `llm.logits` and `llm.embedding` keep their float tables.

    With `method=awq` the linears that read one input form a group (q/k/v,
    gate/up, o_proj, down_proj). Its per-input-channel scales s multiply the
    weights' columns and divide the op producing the input, which must be
    the group's alone: an `llm.rms_norm` (its weight), the up projection
    under `llm.mul` (its rows and bias), or v's projection under
    `llm.attention` (its rows and bias; with GQA the query heads of a kv
    head share scales). Each weight whose values that changes, and is not
    itself becoming int4, is renamed `<name>.awq_scaled`. Groups without
    such a producer are only rounded. `scales-only=true` folds the scales
    but keeps float weights (every rescaled weight renamed): the function
    must not change.

    Before (`method=awq group-size=32`):

    ```mlir
    %g = llm.weight "input_layernorm.weight" : tensor<64xf32>
    %x = llm.rms_norm %h, %g eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
    %wq = llm.weight "q_proj.weight" : tensor<64x64xf32>
    %q = llm.linear %x, %wq : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
    ```

    After (the driver supplies the scaled norm and the packed q_proj):

    ```mlir
    %g = llm.weight "input_layernorm.weight.awq_scaled" : tensor<64xf32>
    %x = llm.rms_norm %h, %g eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
    %wq = llm.weight "q_proj" : !llm.q4<64x64, group = 32>
    %q = llm.linear %x, %wq : tensor<?x64xf32>, !llm.q4<64x64, group = 32> -> tensor<?x64xf32>
    ```
  }];
  let dependentDialects = ["llmc::llm::LlmDialect"];
  let options = [
    Option<"method", "method", "std::string", /*default=*/"\"rtn\"",
           "rtn (round to nearest), awq (activation-aware scales, Lin et al. 2024) or "
           "gptq (the IR as rtn; the driver rounds with GPTQ's error compensation)">,
    Option<"groupSize", "group-size", "int64_t", /*default=*/"128",
           "Input columns per scale and zero point">,
    Option<"scalesOnly", "scales-only", "bool", /*default=*/"false",
           "AWQ: fold the scales (renaming the weights) but keep float weights">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark on the module that says what was quantized">,
  ];
}

#endif // LLMC_PASSES_TD
