// RUN: llm-opt %s --cse --canonicalize | FileCheck %s

// Tests that CSE merges two llm.weight ops of the same name and the pure ops
// that use them, that canonicalize erases unused pure ops, and that
// llm.attention (it writes the KV cache) is neither erased nor merged even
// when its result is unused.

// CHECK-LABEL: func.func @cleanup
func.func @cleanup(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // CHECK:      %[[W:.*]] = llm.weight "w" : tensor<64x64xf32>
  // CHECK-NEXT: %[[A:.*]] = llm.linear %{{.*}}, %[[W]]
  // CHECK-NEXT: %[[S:.*]] = llm.add %[[A]], %[[A]]
  // CHECK-NEXT: llm.attention {{.*}} layer 0
  // CHECK-NEXT: llm.attention {{.*}} layer 0
  // CHECK-NEXT: return %[[S]]
  %w1 = llm.weight "w" : tensor<64x64xf32>
  %w2 = llm.weight "w" : tensor<64x64xf32>
  %a = llm.linear %x, %w1 : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %b = llm.linear %x, %w2 : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %s = llm.add %a, %b : tensor<?x64xf32>
  %unused = llm.silu %x : tensor<?x64xf32>
  %norm_w = llm.weight "unused_norm" : tensor<64xf32>
  %n = llm.rms_norm %x, %norm_w eps 1.0e-6 : tensor<?x64xf32>, tensor<64xf32>
  %att1 = llm.attention %x, %x, %x layer 0 num_heads 4 num_kv_heads 4 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>
  %att2 = llm.attention %x, %x, %x layer 0 num_heads 4 num_kv_heads 4 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>
  return %s : tensor<?x64xf32>
}
