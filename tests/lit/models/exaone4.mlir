// RUN: rm -rf %t && mkdir -p %t
// RUN: cp %S/Inputs/tokenizer.json %t/tokenizer.json
// RUN: echo '{"architectures": ["Exaone4ForCausalLM"], "model_type": "exaone4", \
// RUN:   "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4, \
// RUN:   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 128, \
// RUN:   "max_position_embeddings": 256, "rms_norm_eps": 1e-05, \
// RUN:   "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, \
// RUN:   "sliding_window": 8, "sliding_window_pattern": 2, "tie_word_embeddings": true, \
// RUN:   "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"}' > %t/config.json
// RUN: llmc build %t --synthetic-weights --emit mlir > %t.mlir
// RUN: FileCheck %s < %t.mlir
// RUN: FileCheck %s --check-prefix=COUNT < %t.mlir
// RUN: FileCheck %s --check-prefix=ABSENT < %t.mlir
// RUN: llm-opt %t.mlir | FileCheck %s

// Tests the IR of an EXAONE 4 config (written above): no input norm, per-head
// q/k RMSNorm (group 16) before RoPE, post-norms on the attention and MLP
// outputs before their residual adds; sliding_window_pattern 2 makes layers
// 0 and 2 slide over 8 tokens with RoPE and layers 1 and 3 global with no
// RoPE at all (NoPE: attention reads the normed q and k).

// CHECK-LABEL: func.func @forward(%arg0: tensor<?xi32>, %arg1: tensor<?xi32>) -> tensor<?x128xf32>
// CHECK-NEXT: %[[EMB:.*]] = llm.weight "model.embed_tokens.weight" : tensor<128x64xbf16>
// CHECK-NEXT: %[[X:.*]] = llm.embedding %arg0, %[[EMB]] : tensor<?xi32>, tensor<128x64xbf16> -> tensor<?x64xf32>
// CHECK-NEXT: %[[WQ:.*]] = llm.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xbf16>
// CHECK-NEXT: %[[Q:.*]] = llm.linear %[[X]], %[[WQ]]
// CHECK-NEXT: %[[WK:.*]] = llm.weight "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xbf16>
// CHECK-NEXT: %[[K:.*]] = llm.linear %[[X]], %[[WK]]
// CHECK-NEXT: %[[WQN:.*]] = llm.weight "model.layers.0.self_attn.q_norm.weight" : tensor<16xf32>
// CHECK-NEXT: %[[QN:.*]] = llm.rms_norm %[[Q]], %[[WQN]] eps 1.000000e-05 group 16 :
// CHECK-NEXT: %[[WKN:.*]] = llm.weight "model.layers.0.self_attn.k_norm.weight" : tensor<16xf32>
// CHECK-NEXT: %[[KN:.*]] = llm.rms_norm %[[K]], %[[WKN]] eps 1.000000e-05 group 16 :
// CHECK-NEXT: %[[WV:.*]] = llm.weight "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xbf16>
// CHECK-NEXT: %[[V:.*]] = llm.linear %[[X]], %[[WV]]
// CHECK-NEXT: %[[QR:.*]] = llm.rope %[[QN]], %arg1 num_heads 4 head_dim 16 theta 1.000000e+06 :
// CHECK-NEXT: %[[KR:.*]] = llm.rope %[[KN]], %arg1 num_heads 2 head_dim 16 theta 1.000000e+06 :
// CHECK-NEXT: %[[ATT:.*]] = llm.attention %[[QR]], %[[KR]], %[[V]] layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 2.500000e-01 causal window 8 :
// CHECK-NEXT: %[[WO:.*]] = llm.weight "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xbf16>
// CHECK-NEXT: %[[O:.*]] = llm.linear %[[ATT]], %[[WO]]
// CHECK-NEXT: %[[LN1:.*]] = llm.weight "model.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[ON:.*]] = llm.rms_norm %[[O]], %[[LN1]] eps 1.000000e-05 :
// CHECK-NEXT: %[[R1:.*]] = llm.add %[[X]], %[[ON]]
// CHECK-NEXT: %[[WG:.*]] = llm.weight "model.layers.0.mlp.gate_proj.weight" : tensor<96x64xbf16>
// CHECK-NEXT: %[[G:.*]] = llm.linear %[[R1]], %[[WG]]
// CHECK-NEXT: %[[WU:.*]] = llm.weight "model.layers.0.mlp.up_proj.weight" : tensor<96x64xbf16>
// CHECK-NEXT: %[[U:.*]] = llm.linear %[[R1]], %[[WU]]
// CHECK-NEXT: %[[A:.*]] = llm.silu %[[G]]
// CHECK-NEXT: %[[M:.*]] = llm.mul %[[A]], %[[U]]
// CHECK-NEXT: %[[WD:.*]] = llm.weight "model.layers.0.mlp.down_proj.weight" : tensor<64x96xbf16>
// CHECK-NEXT: %[[D:.*]] = llm.linear %[[M]], %[[WD]]
// CHECK-NEXT: %[[LN2:.*]] = llm.weight "model.layers.0.post_feedforward_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[DN:.*]] = llm.rms_norm %[[D]], %[[LN2]] eps 1.000000e-05 :
// CHECK-NEXT: llm.add %[[R1]], %[[DN]]
// Layer 1 is global and NoPE: the per-head norms feed attention directly.
// CHECK:      %[[QN1:.*]] = llm.rms_norm %{{.*}}, %{{.*}} eps 1.000000e-05 group 16 : tensor<?x64xf32>
// CHECK-NEXT: llm.weight "model.layers.1.self_attn.k_norm.weight"
// CHECK-NEXT: %[[KN1:.*]] = llm.rms_norm %{{.*}}, %{{.*}} eps 1.000000e-05 group 16 : tensor<?x32xf32>
// CHECK-NEXT: llm.weight "model.layers.1.self_attn.v_proj.weight"
// CHECK-NEXT: %[[V1:.*]] = llm.linear
// CHECK-NEXT: llm.attention %[[QN1]], %[[KN1]], %[[V1]] layer 1 num_heads 4 num_kv_heads 2 head_dim 16 scale 2.500000e-01 causal :
// CHECK:      llm.attention {{.*}} layer 2 {{.*}} causal window 8 :
// CHECK:      llm.attention {{.*}} layer 3 {{.*}} causal :
// CHECK:      %[[LNF:.*]] = llm.weight "model.norm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[HF:.*]] = llm.rms_norm %{{.*}}, %[[LNF]] eps 1.000000e-05 :
// CHECK-NEXT: llm.logits %[[HF]], %[[EMB]] : tensor<?x64xf32>, tensor<128x64xbf16> -> tensor<?x128xf32>

// Two sliding layers rotate q and k: 4 ropes; 4 layers.
// COUNT-COUNT-4: llm.rope
// COUNT-NOT:     llm.rope
// ABSENT-NOT: input_layernorm
// ABSENT-NOT: lm_head
// ABSENT-NOT: offset
