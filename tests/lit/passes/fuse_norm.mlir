// RUN: llm-opt %s --split-input-file --llm-fuse-norm | FileCheck %s
// RUN: llm-opt %s --split-input-file --llm-fuse-norm=report=true --mlir-print-op-on-diagnostic=false \
// RUN:   -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT

// Tests that a norm read only by GEMMs moves into each of them: three plain
// projections (one with a bias) each get the prologue, and so does a
// fused_linear (q/k/v or swiglu) that had none.

// REPORT: remark: llm-fuse-norm: 2 RMSNorms -> prologue of 4 GEMMs
// CHECK-LABEL: func.func @norm
func.func @norm(%h: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x160xf32>) {
  // CHECK: %[[G:.*]] = llm.weight "ln1"
  // CHECK: %[[Q:.*]] = llm.fused_linear %arg0, [%{{.*}}] norm %[[G]] eps 1.000000e-05 : tensor<?x64xf32>, [tensor<64x64xf32>] norm tensor<64xf32> -> tensor<?x64xf32>
  // CHECK: %[[K:.*]] = llm.fused_linear %arg0, [%{{.*}}] bias [%{{.*}}] norm %[[G]] eps 1.000000e-05
  // CHECK: %[[V:.*]] = llm.fused_linear %arg0, [%{{.*}}] norm %[[G]] eps 1.000000e-05
  // CHECK: %[[G2:.*]] = llm.weight "ln2"
  // CHECK: %[[A:.*]] = llm.fused_linear %arg0, [%{{.*}}, %{{.*}}] norm %[[G2]] eps 9.99{{.*}}E-7 swiglu
  // CHECK: return %[[Q]], %[[K]], %[[V]], %[[A]]
  // CHECK-NOT: llm.rms_norm
  %g = llm.weight "ln1" : tensor<64xf32>
  %x = llm.rms_norm %h, %g eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
  %wq = llm.weight "q" : tensor<64x64xf32>
  %q = llm.linear %x, %wq : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %wk = llm.weight "k" : tensor<32x64xf32>
  %bk = llm.weight "bk" : tensor<32xf32>
  %k = llm.linear %x, %wk, %bk : tensor<?x64xf32>, tensor<32x64xf32>, tensor<32xf32> -> tensor<?x32xf32>
  %wv = llm.weight "v" : tensor<32x64xf32>
  %v = llm.linear %x, %wv : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  %g2 = llm.weight "ln2" : tensor<64xf32>
  %y = llm.rms_norm %h, %g2 eps 1.0e-6 : tensor<?x64xf32>, tensor<64xf32>
  %wg = llm.weight "gate" : tensor<160x64xf32>
  %wu = llm.weight "up" : tensor<160x64xf32>
  %a = llm.fused_linear %y, [%wg, %wu] swiglu
      : tensor<?x64xf32>, [tensor<160x64xf32>, tensor<160x64xf32>] -> tensor<?x160xf32>
  return %q, %k, %v, %a : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?x160xf32>
}

// -----

// Tests that int4 GEMMs take the prologue too: a plain int4 projection, one
// with a bias (RmsNormLinearQ4 with five weights) and an int4 SwiGLU GEMM.

// REPORT: remark: llm-fuse-norm: 1 RMSNorm -> prologue of 3 GEMMs
// CHECK-LABEL: func.func @int4
// CHECK: %[[G:.*]] = llm.weight "ln"
// CHECK: llm.fused_linear %arg0, [%{{.*}}] norm %[[G]] eps 1.000000e-05 : tensor<?x64xbf16>, [!llm.q4<64x64, group = 32>] norm tensor<64xbf16> -> tensor<?x64xbf16>
// CHECK: llm.fused_linear %arg0, [%{{.*}}] bias [%{{.*}}] norm %[[G]] eps 1.000000e-05 : tensor<?x64xbf16>, [!llm.q4<64x64, group = 32>] bias [tensor<64xf32>] norm tensor<64xbf16> -> tensor<?x64xbf16>
// CHECK: llm.fused_linear %arg0, [%{{.*}}, %{{.*}}] norm %[[G]] eps 1.000000e-05 swiglu : tensor<?x64xbf16>, [!llm.q4<96x64, group = 32>, !llm.q4<96x64, group = 32>]
// CHECK-NOT: llm.rms_norm
func.func @int4(%h: tensor<?x64xbf16>) -> (tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x96xbf16>) {
  %g = llm.weight "ln" : tensor<64xbf16>
  %x = llm.rms_norm %h, %g eps 1.0e-5 : tensor<?x64xbf16>, tensor<64xbf16>
  %wq = llm.weight "q" : !llm.q4<64x64, group = 32>
  %q = llm.linear %x, %wq : tensor<?x64xbf16>, !llm.q4<64x64, group = 32> -> tensor<?x64xbf16>
  %wk = llm.weight "k" : !llm.q4<64x64, group = 32>
  %bk = llm.weight "k_bias" : tensor<64xf32>
  %k = llm.linear %x, %wk, %bk
      : tensor<?x64xbf16>, !llm.q4<64x64, group = 32>, tensor<64xf32> -> tensor<?x64xbf16>
  %wg = llm.weight "gate" : !llm.q4<96x64, group = 32>
  %wu = llm.weight "up" : !llm.q4<96x64, group = 32>
  %a = llm.fused_linear %x, [%wg, %wu] swiglu
      : tensor<?x64xbf16>, [!llm.q4<96x64, group = 32>, !llm.q4<96x64, group = 32>]
      -> tensor<?x96xbf16>
  return %q, %k, %a : tensor<?x64xbf16>, tensor<?x64xbf16>, tensor<?x96xbf16>
}

// -----

// Tests that a norm whose output has two users that cannot all absorb it
// stays: a GEMM and an add; a GEMM and a return; the residual operand of a
// fused_linear; a fused_linear that has a norm already.

// REPORT: remark: llm-fuse-norm: nothing to fuse
// CHECK-LABEL: func.func @no_fusion
// CHECK: %[[X1:.*]] = llm.rms_norm
// CHECK: llm.linear %[[X1]]
// CHECK: %[[X2:.*]] = llm.rms_norm
// CHECK: llm.linear %[[X2]]
// CHECK: %[[X3:.*]] = llm.rms_norm
// CHECK: llm.fused_linear %arg0, [%{{.*}}] residual %[[X3]] :
// CHECK: %[[X5:.*]] = llm.rms_norm
// CHECK: llm.fused_linear %[[X5]], [%{{.*}}] norm
func.func @no_fusion(%h: tensor<?x64xf32>)
    -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>,
        tensor<?x64xf32>) {
  %g = llm.weight "ln" : tensor<64xf32>
  %w = llm.weight "w" : tensor<64x64xf32>
  %x1 = llm.rms_norm %h, %g eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
  %p1 = llm.linear %x1, %w : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %s1 = llm.add %x1, %p1 : tensor<?x64xf32>

  %x2 = llm.rms_norm %h, %g eps 2.0e-5 : tensor<?x64xf32>, tensor<64xf32>
  %p2 = llm.linear %x2, %w : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>

  %x3 = llm.rms_norm %h, %g eps 3.0e-5 : tensor<?x64xf32>, tensor<64xf32>
  %p3 = llm.fused_linear %h, [%w] residual %x3
      : tensor<?x64xf32>, [tensor<64x64xf32>] residual tensor<?x64xf32> -> tensor<?x64xf32>

  %x5 = llm.rms_norm %h, %g eps 5.0e-5 : tensor<?x64xf32>, tensor<64xf32>
  %p5 = llm.fused_linear %x5, [%w] norm %g eps 1.0e-5
      : tensor<?x64xf32>, [tensor<64x64xf32>] norm tensor<64xf32> -> tensor<?x64xf32>
  return %s1, %p2, %x2, %p3, %p5, %p1
      : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>,
        tensor<?x64xf32>
}

// -----

// Tests that a (1 + w) norm (offset 1, Gemma) moves into the GEMM with its
// offset.

// REPORT: remark: llm-fuse-norm: 1 RMSNorm -> prologue of 1 GEMM
// CHECK-LABEL: func.func @norm_offset
// CHECK: llm.fused_linear %arg0, [%{{.*}}, %{{.*}}] norm %{{.*}} eps 9.99{{.*}}E-7 norm_offset 1.000000e+00 geglu_tanh :
// CHECK-NOT: llm.rms_norm
func.func @norm_offset(%x: tensor<?x64xf32>) -> tensor<?x160xf32> {
  %g = llm.weight "ln" : tensor<64xf32>
  %wg = llm.weight "gate" : tensor<160x64xf32>
  %wu = llm.weight "up" : tensor<160x64xf32>
  %y = llm.rms_norm %x, %g eps 1.0e-6 offset 1.0 : tensor<?x64xf32>, tensor<64xf32>
  %a = llm.fused_linear %y, [%wg, %wu] geglu_tanh
      : tensor<?x64xf32>, [tensor<160x64xf32>, tensor<160x64xf32>] -> tensor<?x160xf32>
  return %a : tensor<?x160xf32>
}
