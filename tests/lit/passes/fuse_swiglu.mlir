// RUN: llm-opt %s --split-input-file --llm-fuse-swiglu | FileCheck %s
// RUN: llm-opt %s --split-input-file --llm-fuse-swiglu=report=true --mlir-print-op-on-diagnostic=false \
// RUN:   -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT

// Tests that silu(gate) * up becomes one fused_linear swiglu over [gate, up],
// in both operand orders of the mul.

// REPORT: remark: llm-fuse-swiglu: 2 gate/up pairs -> llm.fused_linear swiglu (8 ops merged)
// CHECK-LABEL: func.func @swiglu
func.func @swiglu(%y: tensor<?x64xf32>) -> (tensor<?x160xf32>, tensor<?x160xf32>) {
  // CHECK: %[[WG:.*]] = llm.weight "gate"
  // CHECK: %[[WU:.*]] = llm.weight "up"
  // CHECK: %[[A:.*]] = llm.fused_linear %arg0, [%[[WG]], %[[WU]]] swiglu : tensor<?x64xf32>, [tensor<160x64xf32>, tensor<160x64xf32>] -> tensor<?x160xf32>
  // CHECK: %[[B:.*]] = llm.fused_linear %arg0, [%[[WG]], %[[WU]]] swiglu
  // CHECK: return %[[A]], %[[B]]
  // CHECK-NOT: llm.silu
  %wg = llm.weight "gate" : tensor<160x64xf32>
  %g = llm.linear %y, %wg : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %wu = llm.weight "up" : tensor<160x64xf32>
  %u = llm.linear %y, %wu : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %s = llm.silu %g : tensor<?x160xf32>
  %a = llm.mul %s, %u : tensor<?x160xf32>
  %g2 = llm.linear %y, %wg : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %u2 = llm.linear %y, %wu : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %s2 = llm.silu %g2 : tensor<?x160xf32>
  %b = llm.mul %u2, %s2 : tensor<?x160xf32>
  return %a, %b : tensor<?x160xf32>, tensor<?x160xf32>
}

// -----

// Tests that int4 gate/up projections of one group size fuse the same way.

// REPORT: remark: llm-fuse-swiglu: 1 gate/up pair -> llm.fused_linear swiglu (4 ops merged)
// CHECK-LABEL: func.func @swiglu_int4
// CHECK: llm.fused_linear %arg0, [%{{.*}}, %{{.*}}] swiglu : tensor<?x64xbf16>, [!llm.q4<160x64, group = 64>, !llm.q4<160x64, group = 64>] -> tensor<?x160xbf16>
// CHECK-NOT: llm.silu
func.func @swiglu_int4(%y: tensor<?x64xbf16>) -> tensor<?x160xbf16> {
  %wg = llm.weight "gate" : !llm.q4<160x64, group = 64>
  %g = llm.linear %y, %wg : tensor<?x64xbf16>, !llm.q4<160x64, group = 64> -> tensor<?x160xbf16>
  %wu = llm.weight "up" : !llm.q4<160x64, group = 64>
  %u = llm.linear %y, %wu : tensor<?x64xbf16>, !llm.q4<160x64, group = 64> -> tensor<?x160xbf16>
  %s = llm.silu %g : tensor<?x160xbf16>
  %a = llm.mul %s, %u : tensor<?x160xbf16>
  return %a : tensor<?x160xbf16>
}

// -----

// Tests the cases that must not fire: the silu output used again; gate and
// up of different inputs; a gate with a bias; weights of two dtypes; a mul
// without a silu.

// REPORT: remark: llm-fuse-swiglu: nothing to fuse
// CHECK-LABEL: func.func @no_fusion
// CHECK-NOT: llm.fused_linear
func.func @no_fusion(%y: tensor<?x64xf32>, %z: tensor<?x64xf32>)
    -> (tensor<?x160xf32>, tensor<?x160xf32>, tensor<?x160xf32>, tensor<?x160xf32>,
        tensor<?x160xf32>, tensor<?x160xf32>) {
  %wg = llm.weight "gate" : tensor<160x64xf32>
  %wu = llm.weight "up" : tensor<160x64xf32>
  %g1 = llm.linear %y, %wg : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %u1 = llm.linear %y, %wu : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %s1 = llm.silu %g1 : tensor<?x160xf32>
  %a1 = llm.mul %s1, %u1 : tensor<?x160xf32>

  %g2 = llm.linear %y, %wg : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %u2 = llm.linear %z, %wu : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %s2 = llm.silu %g2 : tensor<?x160xf32>
  %a2 = llm.mul %s2, %u2 : tensor<?x160xf32>

  %bg = llm.weight "gate_bias" : tensor<160xf32>
  %g3 = llm.linear %y, %wg, %bg : tensor<?x64xf32>, tensor<160x64xf32>, tensor<160xf32> -> tensor<?x160xf32>
  %u3 = llm.linear %y, %wu : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %s3 = llm.silu %g3 : tensor<?x160xf32>
  %a3 = llm.mul %s3, %u3 : tensor<?x160xf32>

  %wu16 = llm.weight "up16" : tensor<160x64xf16>
  %g4 = llm.linear %y, %wg : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %u4 = llm.linear %y, %wu16 : tensor<?x64xf32>, tensor<160x64xf16> -> tensor<?x160xf32>
  %s4 = llm.silu %g4 : tensor<?x160xf32>
  %a4 = llm.mul %s4, %u4 : tensor<?x160xf32>

  %g5 = llm.linear %y, %wg : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %u5 = llm.linear %y, %wu : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %a5 = llm.mul %g5, %u5 : tensor<?x160xf32>
  return %a1, %s1, %a2, %a3, %a4, %a5
      : tensor<?x160xf32>, tensor<?x160xf32>, tensor<?x160xf32>, tensor<?x160xf32>,
        tensor<?x160xf32>, tensor<?x160xf32>
}

// -----

// Tests that GeGLU, gelu(gate) * up in its tanh and erf forms (Gemma's MLP),
// fuses to the matching gated activation.

// REPORT: remark: llm-fuse-swiglu: 2 gate/up pairs -> llm.fused_linear geglu_tanh (8 ops merged)
// CHECK-LABEL: func.func @geglu
// CHECK: %[[A:.*]] = llm.fused_linear %arg0, [%{{.*}}, %{{.*}}] geglu_tanh : tensor<?x64xf32>, [tensor<160x64xf32>, tensor<160x64xf32>] -> tensor<?x160xf32>
// CHECK: %[[B:.*]] = llm.fused_linear %arg0, [%{{.*}}, %{{.*}}] geglu_erf :
// CHECK: return %[[A]], %[[B]]
// CHECK-NOT: llm.gelu
func.func @geglu(%y: tensor<?x64xf32>) -> (tensor<?x160xf32>, tensor<?x160xf32>) {
  %wg = llm.weight "gate" : tensor<160x64xf32>
  %wu = llm.weight "up" : tensor<160x64xf32>
  %g = llm.linear %y, %wg : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %u = llm.linear %y, %wu : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %s = llm.gelu %g tanh : tensor<?x160xf32>
  %a = llm.mul %s, %u : tensor<?x160xf32>
  %g2 = llm.linear %y, %wg : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %u2 = llm.linear %y, %wu : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %s2 = llm.gelu %g2 : tensor<?x160xf32>
  %b = llm.mul %u2, %s2 : tensor<?x160xf32>
  return %a, %b : tensor<?x160xf32>, tensor<?x160xf32>
}

// -----

// Tests that a gelu with another use stays unfused (its value is needed).

// CHECK-LABEL: func.func @geglu_gelu_used
// CHECK: llm.gelu
// CHECK: llm.mul
// CHECK-NOT: llm.fused_linear
func.func @geglu_gelu_used(%y: tensor<?x64xf32>) -> (tensor<?x160xf32>, tensor<?x160xf32>) {
  %wg = llm.weight "gate" : tensor<160x64xf32>
  %wu = llm.weight "up" : tensor<160x64xf32>
  %g = llm.linear %y, %wg : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %u = llm.linear %y, %wu : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %s = llm.gelu %g tanh : tensor<?x160xf32>
  %a = llm.mul %s, %u : tensor<?x160xf32>
  return %a, %s : tensor<?x160xf32>, tensor<?x160xf32>
}
