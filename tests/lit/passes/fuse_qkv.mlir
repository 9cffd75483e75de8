// RUN: llm-opt %s --split-input-file --llm-fuse-qkv | FileCheck %s
// RUN: llm-opt %s --split-input-file --llm-fuse-qkv=report=true --mlir-print-op-on-diagnostic=false \
// RUN:   -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT

// Tests that the q, k and v projections of one attention become one
// fused_linear whose results feed the ropes and the attention, and that the
// k and v weights (defined after the q projection) move up with it.

// REPORT: remark: llm-fuse-qkv: 1 q/k/v group -> llm.fused_linear (3 llm.linear merged)
// CHECK-LABEL: func.func @qkv
func.func @qkv(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // CHECK: %[[WQ:.*]] = llm.weight "q"
  // CHECK: %[[WK:.*]] = llm.weight "k"
  // CHECK: %[[WV:.*]] = llm.weight "v"
  // CHECK: %[[QKV:.*]]:3 = llm.fused_linear %arg0, [%[[WQ]], %[[WK]], %[[WV]]] : tensor<?x64xf32>, [tensor<64x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>] -> tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
  // CHECK: %[[QR:.*]] = llm.rope %[[QKV]]#0
  // CHECK: %[[KR:.*]] = llm.rope %[[QKV]]#1
  // CHECK: llm.attention %[[QR]], %[[KR]], %[[QKV]]#2
  // CHECK-NOT: llm.linear
  %wq = llm.weight "q" : tensor<64x64xf32>
  %q = llm.linear %x, %wq : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %wk = llm.weight "k" : tensor<32x64xf32>
  %k = llm.linear %x, %wk : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  %wv = llm.weight "v" : tensor<32x64xf32>
  %v = llm.linear %x, %wv : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  %qr = llm.rope %q, %pos num_heads 4 head_dim 16 theta 1.0e4 : tensor<?x64xf32>, tensor<?xi32>
  %kr = llm.rope %k, %pos num_heads 2 head_dim 16 theta 1.0e4 : tensor<?x32xf32>, tensor<?xi32>
  %o = llm.attention %qr, %kr, %v layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
  return %o : tensor<?x64xf32>
}

// -----

// Tests that int4 q/k/v projections of one group size fuse too (the plan
// stores their int4 parts row-concatenated).

// REPORT: remark: llm-fuse-qkv: 1 q/k/v group
// CHECK-LABEL: func.func @qkv_int4
// CHECK: %[[QKV:.*]]:3 = llm.fused_linear %arg0, [%{{.*}}, %{{.*}}, %{{.*}}] : tensor<?x64xbf16>, [!llm.q4<64x64, group = 32>, !llm.q4<32x64, group = 32>, !llm.q4<32x64, group = 32>]
// CHECK: llm.attention %[[QKV]]#0, %[[QKV]]#1, %[[QKV]]#2
func.func @qkv_int4(%x: tensor<?x64xbf16>) -> tensor<?x64xbf16> {
  %wq = llm.weight "q" : !llm.q4<64x64, group = 32>
  %q = llm.linear %x, %wq : tensor<?x64xbf16>, !llm.q4<64x64, group = 32> -> tensor<?x64xbf16>
  %wk = llm.weight "k" : !llm.q4<32x64, group = 32>
  %k = llm.linear %x, %wk : tensor<?x64xbf16>, !llm.q4<32x64, group = 32> -> tensor<?x32xbf16>
  %wv = llm.weight "v" : !llm.q4<32x64, group = 32>
  %v = llm.linear %x, %wv : tensor<?x64xbf16>, !llm.q4<32x64, group = 32> -> tensor<?x32xbf16>
  %o = llm.attention %q, %k, %v layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
      : tensor<?x64xbf16>, tensor<?x32xbf16>, tensor<?x32xbf16>
  return %o : tensor<?x64xbf16>
}

// -----

// Tests that Qwen2's q/k/v biases are concatenated too, and that an
// llm.rope_attention (rope fused first) is matched like an attention.

// REPORT: remark: llm-fuse-qkv: 1 q/k/v group
// CHECK-LABEL: func.func @qkv_bias_rope_attention
func.func @qkv_bias_rope_attention(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // CHECK: %[[QKV:.*]]:3 = llm.fused_linear %arg0, [%{{.*}}, %{{.*}}, %{{.*}}] bias [%{{.*}}, %{{.*}}, %{{.*}}]
  // CHECK: llm.rope_attention %[[QKV]]#0, %[[QKV]]#1, %[[QKV]]#2, %arg1
  %wq = llm.weight "q" : tensor<64x64xf32>
  %bq = llm.weight "bq" : tensor<64xf32>
  %q = llm.linear %x, %wq, %bq : tensor<?x64xf32>, tensor<64x64xf32>, tensor<64xf32> -> tensor<?x64xf32>
  %wk = llm.weight "k" : tensor<32x64xf32>
  %bk = llm.weight "bk" : tensor<32xf32>
  %k = llm.linear %x, %wk, %bk : tensor<?x64xf32>, tensor<32x64xf32>, tensor<32xf32> -> tensor<?x32xf32>
  %wv = llm.weight "v" : tensor<32x64xf32>
  %bv = llm.weight "bv" : tensor<32xf32>
  %v = llm.linear %x, %wv, %bv : tensor<?x64xf32>, tensor<32x64xf32>, tensor<32xf32> -> tensor<?x32xf32>
  %o = llm.rope_attention %q, %k, %v, %pos layer 0 num_heads 4 num_kv_heads 2 head_dim 16
      theta 1.0e4 scale 0.25 causal : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?xi32>
  return %o : tensor<?x64xf32>
}

// -----

// Tests the cases that must not fire: k and v one projection; projections
// of different inputs; a projection with another use; biases on some only;
// an int4 weight; weights of two dtypes.

// REPORT: remark: llm-fuse-qkv: nothing to fuse
// CHECK-LABEL: func.func @no_fusion
// CHECK-NOT: llm.fused_linear
func.func @no_fusion(%x: tensor<?x64xf32>, %y: tensor<?x64xf32>, %h: tensor<?x64xf16>)
    -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x64xf32>, tensor<?x64xf32>,
        tensor<?x64xf16>) {
  %wq = llm.weight "q" : tensor<64x64xf32>
  %wk = llm.weight "k" : tensor<32x64xf32>
  %wv = llm.weight "v" : tensor<32x64xf32>
  %q1 = llm.linear %x, %wq : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %kv1 = llm.linear %x, %wk : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  %o1 = llm.attention %q1, %kv1, %kv1 layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>

  %q2 = llm.linear %x, %wq : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %k2 = llm.linear %y, %wk : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  %v2 = llm.linear %x, %wv : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  %o2 = llm.attention %q2, %k2, %v2 layer 1 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>

  %q3 = llm.linear %x, %wq : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %k3 = llm.linear %x, %wk : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  %v3 = llm.linear %x, %wv : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  %o3 = llm.attention %q3, %k3, %v3 layer 2 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>

  %bk = llm.weight "bk" : tensor<32xf32>
  %q4 = llm.linear %x, %wq : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %k4 = llm.linear %x, %wk, %bk : tensor<?x64xf32>, tensor<32x64xf32>, tensor<32xf32> -> tensor<?x32xf32>
  %v4 = llm.linear %x, %wv : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  %o4 = llm.attention %q4, %k4, %v4 layer 3 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>

  %wq4 = llm.weight "q_int4" : !llm.q4<64x64, group = 32>
  %wk16 = llm.weight "k16" : tensor<32x64xf16>
  %wv16 = llm.weight "v16" : tensor<32x64xf16>
  %q5 = llm.linear %h, %wq4 : tensor<?x64xf16>, !llm.q4<64x64, group = 32> -> tensor<?x64xf16>
  %k5 = llm.linear %h, %wk16 : tensor<?x64xf16>, tensor<32x64xf16> -> tensor<?x32xf16>
  %v5 = llm.linear %h, %wv16 : tensor<?x64xf16>, tensor<32x64xf16> -> tensor<?x32xf16>
  %o5 = llm.attention %q5, %k5, %v5 layer 4 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25
      : tensor<?x64xf16>, tensor<?x32xf16>, tensor<?x32xf16>

  %wk32 = llm.weight "k32" : tensor<32x64xf32>
  %wv16b = llm.weight "v16b" : tensor<32x64xf16>
  %q6 = llm.linear %x, %wq : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %k6 = llm.linear %x, %wk32 : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  %v6 = llm.linear %x, %wv16b : tensor<?x64xf32>, tensor<32x64xf16> -> tensor<?x32xf32>
  %o6 = llm.attention %q6, %k6, %v6 layer 5 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
  return %o1, %o2, %k3, %o4, %o6, %o5
      : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x64xf32>, tensor<?x64xf32>,
        tensor<?x64xf16>
}
