// RUN: rm -rf %t && mkdir -p %t
// RUN: cp %S/Inputs/tokenizer.json %t/tokenizer.json
// RUN: echo '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", \
// RUN:   "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, \
// RUN:   "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, \
// RUN:   "max_position_embeddings": 1024, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, \
// RUN:   "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, \
// RUN:     "high_freq_factor": 4.0, "original_max_position_embeddings": 128}, \
// RUN:   "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2, \
// RUN:   "torch_dtype": "bfloat16"}' > %t/config.json
// RUN: llmc build %t --synthetic-weights --emit mlir > %t.mlir
// RUN: FileCheck %s < %t.mlir
// RUN: FileCheck %s --check-prefix=COUNT < %t.mlir
// RUN: FileCheck %s --check-prefix=ROPE < %t.mlir
// RUN: FileCheck %s --check-prefix=ABSENT < %t.mlir
// RUN: llm-opt %t.mlir | FileCheck %s

// Tests the IR of a Llama-3-style config (written above): H = 64, 4 query
// heads and 2 kv heads of D = 16 (k and v 32 wide), 2 layers, bf16 matrices
// with f32 norms, llama3 rope scaling on both q and k, no biases, and an
// untied lm_head that the logits use instead of the embedding.

// CHECK-LABEL: func.func @forward(%arg0: tensor<?xi32>, %arg1: tensor<?xi32>) -> tensor<?x256xf32>
// CHECK-NEXT: %[[EMB:.*]] = llm.weight "model.embed_tokens.weight" : tensor<256x64xbf16>
// CHECK:      llm.weight "model.layers.0.input_layernorm.weight" : tensor<64xf32>
// CHECK:      %[[WQ:.*]] = llm.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xbf16>
// CHECK-NEXT: %[[Q:.*]] = llm.linear %{{.*}}, %[[WQ]] : tensor<?x64xf32>, tensor<64x64xbf16> -> tensor<?x64xf32>
// CHECK-NEXT: %[[WK:.*]] = llm.weight "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xbf16>
// CHECK-NEXT: %[[K:.*]] = llm.linear %{{.*}}, %[[WK]] : tensor<?x64xf32>, tensor<32x64xbf16> -> tensor<?x32xf32>
// CHECK-NEXT: %[[WV:.*]] = llm.weight "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xbf16>
// CHECK-NEXT: %[[V:.*]] = llm.linear %{{.*}}, %[[WV]] : tensor<?x64xf32>, tensor<32x64xbf16> -> tensor<?x32xf32>
// CHECK-NEXT: %[[QR:.*]] = llm.rope %[[Q]], %arg1 num_heads 4 head_dim 16 theta 5.000000e+05 scaling <llama3, factor = 8.000000e+00, low_freq_factor = 1.000000e+00, high_freq_factor = 4.000000e+00, original_max_position_embeddings = 128> : tensor<?x64xf32>, tensor<?xi32>
// CHECK-NEXT: %[[KR:.*]] = llm.rope %[[K]], %arg1 num_heads 2 head_dim 16 theta 5.000000e+05 scaling <llama3, factor = 8.000000e+00, low_freq_factor = 1.000000e+00, high_freq_factor = 4.000000e+00, original_max_position_embeddings = 128> : tensor<?x32xf32>, tensor<?xi32>
// CHECK-NEXT: %[[ATT:.*]] = llm.attention %[[QR]], %[[KR]], %[[V]] layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 2.500000e-01 causal : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
// CHECK-NEXT: %[[WO:.*]] = llm.weight "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xbf16>
// CHECK-NEXT: llm.linear %[[ATT]], %[[WO]] : tensor<?x64xf32>, tensor<64x64xbf16> -> tensor<?x64xf32>
// CHECK:      llm.weight "model.layers.0.mlp.gate_proj.weight" : tensor<128x64xbf16>
// CHECK:      llm.weight "model.layers.0.mlp.down_proj.weight" : tensor<64x128xbf16>
// CHECK:      llm.attention {{.*}} layer 1 num_heads 4 num_kv_heads 2 head_dim 16
// CHECK:      %[[LNF:.*]] = llm.weight "model.norm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[HF:.*]] = llm.rms_norm %{{.*}}, %[[LNF]]
// CHECK-NEXT: %[[HEAD:.*]] = llm.weight "lm_head.weight" : tensor<256x64xbf16>
// CHECK-NEXT: %[[LOGITS:.*]] = llm.logits %[[HF]], %[[HEAD]] : tensor<?x64xf32>, tensor<256x64xbf16> -> tensor<?x256xf32>
// CHECK-NEXT: return %[[LOGITS]]

// Two layers, q and k rope scaled in each.
// ROPE-COUNT-4:  llm.rope {{.*}} scaling <llama3, factor = 8.000000e+00
// ROPE-NOT:      llm.rope
// COUNT-COUNT-2: llm.attention
// COUNT-NOT:     llm.attention
// No bias anywhere (Llama's attention_bias defaults to false).
// ABSENT-NOT: .bias
