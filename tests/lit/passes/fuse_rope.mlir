// RUN: llm-opt %s --split-input-file --llm-fuse-rope | FileCheck %s
// RUN: llm-opt %s --split-input-file --llm-fuse-rope=report=true --mlir-print-op-on-diagnostic=false \
// RUN:   -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT

// Tests that the ropes of q and k (with llama3 scaling) move into the
// attention, which then reads the unrotated q and k.

// REPORT: remark: llm-fuse-rope: 1 attention + 2 RoPEs -> llm.rope_attention
// CHECK-LABEL: func.func @rope
func.func @rope(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  // CHECK: %[[O:.*]] = llm.rope_attention %arg0, %arg1, %arg2, %arg3 layer 2 num_heads 4 num_kv_heads 2 head_dim 16 theta 5.000000e+05 scaling <llama3, factor = 8.000000e+00, low_freq_factor = 1.000000e+00, high_freq_factor = 4.000000e+00, original_max_position_embeddings = 8192> scale 2.500000e-01 causal : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?xi32>
  // CHECK: return %[[O]]
  // CHECK-NOT: llm.rope
  %qr = llm.rope %q, %pos num_heads 4 head_dim 16 theta 5.0e5
      scaling <llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0,
               original_max_position_embeddings = 8192> : tensor<?x64xf32>, tensor<?xi32>
  %kr = llm.rope %k, %pos num_heads 2 head_dim 16 theta 5.0e5
      scaling <llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0,
               original_max_position_embeddings = 8192> : tensor<?x32xf32>, tensor<?xi32>
  %o = llm.attention %qr, %kr, %v layer 2 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
  return %o : tensor<?x64xf32>
}

// -----

// Tests the cases that must not fire: a rotated k used again; only q
// rotated; q and k rotated at different positions; different theta.

// REPORT: remark: llm-fuse-rope: nothing to fuse
// CHECK-LABEL: func.func @no_fusion
// CHECK-NOT: llm.rope_attention
func.func @no_fusion(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>,
                     %pos: tensor<?xi32>, %pos2: tensor<?xi32>)
    -> (tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>) {
  %qr1 = llm.rope %q, %pos num_heads 4 head_dim 16 theta 1.0e4 : tensor<?x64xf32>, tensor<?xi32>
  %kr1 = llm.rope %k, %pos num_heads 2 head_dim 16 theta 1.0e4 : tensor<?x32xf32>, tensor<?xi32>
  %o1 = llm.attention %qr1, %kr1, %v layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>

  %qr2 = llm.rope %q, %pos num_heads 4 head_dim 16 theta 1.0e4 : tensor<?x64xf32>, tensor<?xi32>
  %o2 = llm.attention %qr2, %k, %v layer 1 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>

  %qr3 = llm.rope %q, %pos num_heads 4 head_dim 16 theta 1.0e4 : tensor<?x64xf32>, tensor<?xi32>
  %kr3 = llm.rope %k, %pos2 num_heads 2 head_dim 16 theta 1.0e4 : tensor<?x32xf32>, tensor<?xi32>
  %o3 = llm.attention %qr3, %kr3, %v layer 2 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>

  %qr4 = llm.rope %q, %pos num_heads 4 head_dim 16 theta 1.0e4 : tensor<?x64xf32>, tensor<?xi32>
  %kr4 = llm.rope %k, %pos num_heads 2 head_dim 16 theta 5.0e5 : tensor<?x32xf32>, tensor<?xi32>
  %o4 = llm.attention %qr4, %kr4, %v layer 3 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
  return %o1, %kr1, %o2, %o3, %o4
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>
}

// -----

// Tests that attention soft-capping and a sliding window (Gemma 2) carry
// over into the fused op.

// REPORT: remark: llm-fuse-rope: 1 attention + 2 RoPEs -> llm.rope_attention
// CHECK-LABEL: func.func @rope_softcap_window
// CHECK: llm.rope_attention %arg0, %arg1, %arg2, %arg3 layer 0 num_heads 4 num_kv_heads 2 head_dim 16 theta 1.000000e+04 scale 6.250000e-02 causal softcap 5.000000e+01 window 8 :
func.func @rope_softcap_window(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x32xf32>, %pos: tensor<?xi32>) -> tensor<?x64xf32> {
  %qr = llm.rope %q, %pos num_heads 4 head_dim 16 theta 1.0e4 : tensor<?x64xf32>, tensor<?xi32>
  %kr = llm.rope %k, %pos num_heads 2 head_dim 16 theta 1.0e4 : tensor<?x32xf32>, tensor<?xi32>
  %o = llm.attention %qr, %kr, %v layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.0625 causal
      softcap 50.0 window 8 : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
  return %o : tensor<?x64xf32>
}
