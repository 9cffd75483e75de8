// RUN: llm-opt %s --split-input-file --llm-prune | FileCheck %s
// RUN: llm-opt %s --split-input-file --llm-prune=report=true --mlir-print-op-on-diagnostic=false \
// RUN:   -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=REPORT

// Tests that duplicate weights are merged into the first, that an unused
// chain of pure ops goes with the weights only it used, and that the bytes
// of those weights are reported (64 f32 = 256 B, 16x64 f16 = 2048 B).

// REPORT: remark: llm-prune: merged 1 duplicate weight op, erased 2 unused ops and 2 unused weight ops; 2 weights no longer needed (2304 B); unused_norm tensor<64xf32> 256 B; unused_proj tensor<16x64xf16> 2048 B
// CHECK-LABEL: func.func @merge_and_erase
func.func @merge_and_erase(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // CHECK-NEXT: %[[W:.*]] = llm.weight "w" : tensor<64x64xf32>
  // CHECK-NEXT: %[[A:.*]] = llm.linear %{{.*}}, %[[W]]
  // CHECK-NEXT: %[[B:.*]] = llm.linear %{{.*}}, %[[W]]
  // CHECK-NEXT: %[[S:.*]] = llm.add %[[A]], %[[B]]
  // CHECK-NEXT: return %[[S]]
  // CHECK-NOT: llm.
  %w1 = llm.weight "w" : tensor<64x64xf32>
  %w2 = llm.weight "w" : tensor<64x64xf32>
  %a = llm.linear %x, %w1 : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %b = llm.linear %x, %w2 : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %s = llm.add %a, %b : tensor<?x64xf32>
  %norm_w = llm.weight "unused_norm" : tensor<64xf32>
  %n = llm.rms_norm %x, %norm_w eps 1.0e-6 : tensor<?x64xf32>, tensor<64xf32>
  %proj = llm.weight "unused_proj" : tensor<16x64xf16>
  %p = llm.linear %n, %proj : tensor<?x64xf32>, tensor<16x64xf16> -> tensor<?x16xf32>
  return %s : tensor<?x64xf32>
}

// -----

// Tests that llm.attention stays when its result is unused (it appends to the
// KV cache), and with it the projections and weights that feed it.

// REPORT: remark: llm-prune: merged 0 duplicate weight ops, erased 1 unused op and 0 unused weight ops; 0 weights no longer needed (0 B)
// CHECK-LABEL: func.func @attention_result_unused
func.func @attention_result_unused(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // CHECK: %[[WQ:.*]] = llm.weight "q_proj" : tensor<64x64xf32>
  // CHECK: %[[Q:.*]] = llm.linear %{{.*}}, %[[WQ]]
  // CHECK: %[[WK:.*]] = llm.weight "k_proj" : tensor<32x64xf32>
  // CHECK: %[[K:.*]] = llm.linear %{{.*}}, %[[WK]]
  // CHECK: %[[QR:.*]] = llm.rope %[[Q]]
  // CHECK: llm.attention %[[QR]], %[[K]], %[[K]] layer 0
  // CHECK-NOT: llm.silu
  // CHECK: return %arg0
  %wq = llm.weight "q_proj" : tensor<64x64xf32>
  %q = llm.linear %x, %wq : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %wk = llm.weight "k_proj" : tensor<32x64xf32>
  %k = llm.linear %x, %wk : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  %qr = llm.rope %q, %pos num_heads 4 head_dim 16 theta 1.0e4 : tensor<?x64xf32>, tensor<?xi32>
  %att = llm.attention %qr, %k, %k layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
  %dead = llm.silu %att : tensor<?x64xf32>
  return %x : tensor<?x64xf32>
}

// -----

// Tests that a tied embedding (one weight, two uses) is left alone and that
// the pass then reports nothing.

// REPORT: remark: llm-prune: nothing to do
// CHECK-LABEL: func.func @tied_embedding
func.func @tied_embedding(%tokens: tensor<?xi32>) -> tensor<?x128xf32> {
  // CHECK-NEXT: %[[E:.*]] = llm.weight "model.embed_tokens.weight" : tensor<128x64xf32>
  // CHECK-NEXT: %[[H:.*]] = llm.embedding %{{.*}}, %[[E]]
  // CHECK-NEXT: llm.logits %[[H]], %[[E]]
  %emb = llm.weight "model.embed_tokens.weight" : tensor<128x64xf32>
  %h = llm.embedding %tokens, %emb : tensor<?xi32>, tensor<128x64xf32> -> tensor<?x64xf32>
  %l = llm.logits %h, %emb : tensor<?x64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>
  return %l : tensor<?x128xf32>
}

// -----

// Tests that weights of the same name in two functions are not merged (neither
// dominates the other), and that erasing an unused copy frees no bytes while
// another function still refers to the name. An unused q4 weight is sized as
// 64 rows x 32 bytes of nibbles + 64 rows x 2 groups x (f16 scale + f16 zero).

// REPORT: remark: llm-prune: merged 0 duplicate weight ops, erased 0 unused ops and 2 unused weight ops; 1 weight no longer needed (2560 B); q4_proj !llm.q4<64x64, group = 32> 2560 B
// CHECK-LABEL: func.func @prefill
// CHECK-NEXT: llm.weight "shared"
// CHECK-NEXT: llm.linear
// CHECK-LABEL: func.func @decode
// CHECK-NEXT: return
func.func @prefill(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "shared" : tensor<64x64xf32>
  %y = llm.linear %x, %w : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
func.func @decode(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "shared" : tensor<64x64xf32>
  %q = llm.weight "q4_proj" : !llm.q4<64x64, group = 32>
  return %x : tensor<?x64xf32>
}
