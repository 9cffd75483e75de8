// RUN: llm-opt %s --split-input-file --llm-fuse-residual | FileCheck %s
// RUN: llm-opt %s --split-input-file --llm-fuse-residual=report=true --mlir-print-op-on-diagnostic=false \
// RUN:   -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT

// Tests that the two residual adds of a layer move into the o_proj and
// down_proj GEMMs (a plain linear and a fused_linear with a norm), the
// residual on either side of the add, and that the second accumulates into
// the first one's result (one buffer for the residual stream).

// REPORT: remark: llm-fuse-residual: 2 residual adds -> GEMM epilogue (accumulate in place)
// CHECK-LABEL: func.func @residual
func.func @residual(%h0: tensor<?x64xf32>, %att: tensor<?x64xf32>, %act: tensor<?x160xf32>) -> tensor<?x64xf32> {
  // CHECK: %[[E:.*]] = llm.silu %arg0
  // CHECK: %[[H1:.*]] = llm.fused_linear %arg1, [%{{.*}}] residual %[[E]] : tensor<?x64xf32>, [tensor<64x64xf32>] residual tensor<?x64xf32> -> tensor<?x64xf32>
  // CHECK: %[[H2:.*]] = llm.fused_linear %arg2, [%{{.*}}] norm %{{.*}} eps 1.000000e-05 residual %[[H1]] : tensor<?x160xf32>, [tensor<64x160xf32>] norm tensor<160xf32> residual tensor<?x64xf32> -> tensor<?x64xf32>
  // CHECK: return %[[H2]]
  // CHECK-NOT: llm.add
  %e = llm.silu %h0 : tensor<?x64xf32>
  %wo = llm.weight "o" : tensor<64x64xf32>
  %o = llm.linear %att, %wo : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %h1 = llm.add %e, %o : tensor<?x64xf32>
  %wd = llm.weight "down" : tensor<64x160xf32>
  %g = llm.weight "ln" : tensor<160xf32>
  %d = llm.fused_linear %act, [%wd] norm %g eps 1.0e-5
      : tensor<?x160xf32>, [tensor<64x160xf32>] norm tensor<160xf32> -> tensor<?x64xf32>
  %h2 = llm.add %d, %h1 : tensor<?x64xf32>
  return %h2 : tensor<?x64xf32>
}

// -----

// Tests that an int4 o_proj takes the residual add as well.

// REPORT: remark: llm-fuse-residual: 1 residual add -> GEMM epilogue (accumulate in place)
// CHECK-LABEL: func.func @residual_int4
// CHECK: llm.fused_linear %arg1, [%{{.*}}] residual %{{.*}} : tensor<?x64xbf16>, [!llm.q4<64x64, group = 32>] residual tensor<?x64xbf16> -> tensor<?x64xbf16>
// CHECK-NOT: llm.add
func.func @residual_int4(%h0: tensor<?x64xbf16>, %att: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  %e = llm.silu %h0 : tensor<?x64xbf16>
  %wo = llm.weight "o" : !llm.q4<64x64, group = 32>
  %o = llm.linear %att, %wo : tensor<?x64xbf16>, !llm.q4<64x64, group = 32> -> tensor<?x64xbf16>
  %h1 = llm.add %e, %o : tensor<?x64xbf16>
  return %h1 : tensor<?x64xbf16>
}

// -----

// Tests the cases that must not fire: the residual read after the add (it
// would see the updated buffer); the GEMM result used twice; the residual
// being the GEMM's own input; the residual a function argument (no buffer
// of its own); a multi-result fused_linear; a SwiGLU GEMM.

// REPORT: remark: llm-fuse-residual: nothing to fuse
// CHECK-LABEL: func.func @no_fusion
// CHECK-NOT: residual
func.func @no_fusion(%x: tensor<?x64xf32>, %att: tensor<?x64xf32>)
    -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>,
        tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>) {
  %w = llm.weight "w" : tensor<64x64xf32>
  %r1 = llm.silu %x : tensor<?x64xf32>
  %o1 = llm.linear %att, %w : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %h1 = llm.add %r1, %o1 : tensor<?x64xf32>
  %late = llm.silu %r1 : tensor<?x64xf32>

  %r2 = llm.silu %att : tensor<?x64xf32>
  %o2 = llm.linear %att, %w : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %h2 = llm.add %r2, %o2 : tensor<?x64xf32>

  %r3 = llm.gelu %x : tensor<?x64xf32>
  %o3 = llm.linear %r3, %w : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %h3 = llm.add %r3, %o3 : tensor<?x64xf32>

  %o4 = llm.linear %att, %w : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %h4 = llm.add %x, %o4 : tensor<?x64xf32>

  %r5 = llm.gelu %att tanh : tensor<?x64xf32>
  %p5, %q5 = llm.fused_linear %att, [%w, %w]
      : tensor<?x64xf32>, [tensor<64x64xf32>, tensor<64x64xf32>] -> tensor<?x64xf32>, tensor<?x64xf32>
  %h5 = llm.add %r5, %p5 : tensor<?x64xf32>

  %r6 = llm.silu %att : tensor<?x64xf32>
  %a6 = llm.fused_linear %att, [%w, %w] swiglu
      : tensor<?x64xf32>, [tensor<64x64xf32>, tensor<64x64xf32>] -> tensor<?x64xf32>
  %h6 = llm.add %r6, %a6 : tensor<?x64xf32>
  return %h1, %late, %h2, %o2, %h3, %h4, %h5, %h6
      : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>,
        tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

// Tests Gemma 2's post-norms: h + rms_norm(o_proj(a)) is not a GEMM's
// residual epilogue (the norm sits between), so the add stays.

// REPORT: remark: llm-fuse-residual: nothing to fuse
// CHECK-LABEL: func.func @post_norm
// CHECK: llm.linear
// CHECK: llm.rms_norm
// CHECK: llm.add
// CHECK-NOT: residual
func.func @post_norm(%h: tensor<?x64xf32>, %a: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %wo = llm.weight "o" : tensor<64x64xf32>
  %g = llm.weight "post" : tensor<64xf32>
  %o = llm.linear %a, %wo : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %n = llm.rms_norm %o, %g eps 1.0e-6 offset 1.0 : tensor<?x64xf32>, tensor<64xf32>
  %r = llm.add %h, %n : tensor<?x64xf32>
  return %r : tensor<?x64xf32>
}
