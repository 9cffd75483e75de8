// RUN: rm -rf %t && mkdir -p %t
// RUN: cp %S/Inputs/tokenizer.json %t/tokenizer.json
// RUN: echo '{"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", \
// RUN:   "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3, \
// RUN:   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 128, \
// RUN:   "max_position_embeddings": 256, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, \
// RUN:   "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0}, \
// RUN:   "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 24, \
// RUN:   "sliding_window": 8, "sliding_window_pattern": 3, \
// RUN:   "bos_token_id": 2, "eos_token_id": 1, "torch_dtype": "bfloat16"}' > %t/config.json
// RUN: llmc build %t --synthetic-weights --emit mlir > %t.mlir
// RUN: FileCheck %s < %t.mlir
// RUN: FileCheck %s --check-prefix=COUNT < %t.mlir
// RUN: FileCheck %s --check-prefix=ABSENT < %t.mlir
// RUN: llm-opt %t.mlir | FileCheck %s

// Tests the IR of a Gemma3 text config in transformers 4.5x's spelling
// (written above): Gemma2's layout (sqrt(64) = 8 embedding scale, (1 + w)
// sandwich norms, GeGLU, scores scaled by 24^-0.5) plus per-head (1 + w) q/k
// norms before RoPE; sliding_window_pattern 3 makes layers 0 and 1 slide over
// 8 tokens and rotate by rope_local_base_freq 10000, and layer 2 global,
// rotating by rope_theta 1e6 with the linear rope_scaling (which reaches the
// global layers only); no soft-capping (Gemma3's defaults are null).

// CHECK-LABEL: func.func @forward(%arg0: tensor<?xi32>, %arg1: tensor<?xi32>) -> tensor<?x128xf32>
// CHECK-NEXT: %[[EMB:.*]] = llm.weight "model.embed_tokens.weight" : tensor<128x64xbf16>
// CHECK-NEXT: %[[X:.*]] = llm.embedding %arg0, %[[EMB]] scale 8.000000e+00 : tensor<?xi32>, tensor<128x64xbf16> -> tensor<?x64xf32>
// CHECK-NEXT: %[[LN1:.*]] = llm.weight "model.layers.0.input_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[H:.*]] = llm.rms_norm %[[X]], %[[LN1]] eps {{.*}} offset 1.000000e+00 :
// CHECK-NEXT: %[[WQ:.*]] = llm.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xbf16>
// CHECK-NEXT: %[[Q:.*]] = llm.linear %[[H]], %[[WQ]]
// CHECK-NEXT: %[[WK:.*]] = llm.weight "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xbf16>
// CHECK-NEXT: %[[K:.*]] = llm.linear %[[H]], %[[WK]]
// CHECK-NEXT: %[[WQN:.*]] = llm.weight "model.layers.0.self_attn.q_norm.weight" : tensor<16xf32>
// CHECK-NEXT: %[[QN:.*]] = llm.rms_norm %[[Q]], %[[WQN]] eps {{.*}} offset 1.000000e+00 group 16 :
// CHECK-NEXT: %[[WKN:.*]] = llm.weight "model.layers.0.self_attn.k_norm.weight" : tensor<16xf32>
// CHECK-NEXT: %[[KN:.*]] = llm.rms_norm %[[K]], %[[WKN]] eps {{.*}} offset 1.000000e+00 group 16 :
// CHECK-NEXT: %[[WV:.*]] = llm.weight "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xbf16>
// CHECK-NEXT: %[[V:.*]] = llm.linear %[[H]], %[[WV]]
// CHECK-NEXT: %[[QR:.*]] = llm.rope %[[QN]], %arg1 num_heads 4 head_dim 16 theta 1.000000e+04 :
// CHECK-NEXT: %[[KR:.*]] = llm.rope %[[KN]], %arg1 num_heads 2 head_dim 16 theta 1.000000e+04 :
// CHECK-NEXT: %[[ATT:.*]] = llm.attention %[[QR]], %[[KR]], %[[V]] layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.20412414523193154 causal window 8 :
// CHECK-NEXT: %[[WO:.*]] = llm.weight "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xbf16>
// CHECK-NEXT: %[[O:.*]] = llm.linear %[[ATT]], %[[WO]]
// CHECK-NEXT: %[[LN2:.*]] = llm.weight "model.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[ON:.*]] = llm.rms_norm %[[O]], %[[LN2]] eps {{.*}} offset 1.000000e+00 :
// CHECK-NEXT: %[[R1:.*]] = llm.add %[[X]], %[[ON]]
// CHECK-NEXT: %[[LN3:.*]] = llm.weight "model.layers.0.pre_feedforward_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[H2:.*]] = llm.rms_norm %[[R1]], %[[LN3]] eps {{.*}} offset 1.000000e+00 :
// CHECK-NEXT: %[[WG:.*]] = llm.weight "model.layers.0.mlp.gate_proj.weight" : tensor<96x64xbf16>
// CHECK-NEXT: %[[G:.*]] = llm.linear %[[H2]], %[[WG]]
// CHECK-NEXT: %[[WU:.*]] = llm.weight "model.layers.0.mlp.up_proj.weight" : tensor<96x64xbf16>
// CHECK-NEXT: %[[U:.*]] = llm.linear %[[H2]], %[[WU]]
// CHECK-NEXT: %[[A:.*]] = llm.gelu %[[G]] tanh : tensor<?x96xf32>
// CHECK-NEXT: %[[M:.*]] = llm.mul %[[A]], %[[U]]
// CHECK-NEXT: %[[WD:.*]] = llm.weight "model.layers.0.mlp.down_proj.weight" : tensor<64x96xbf16>
// CHECK-NEXT: %[[D:.*]] = llm.linear %[[M]], %[[WD]]
// CHECK-NEXT: %[[LN4:.*]] = llm.weight "model.layers.0.post_feedforward_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[DN:.*]] = llm.rms_norm %[[D]], %[[LN4]] eps {{.*}} offset 1.000000e+00 :
// CHECK-NEXT: llm.add %[[R1]], %[[DN]]
// Layer 1 slides too; layer 2 is global: base 1e6, linear scaling, no window.
// CHECK:      llm.rope {{.*}} num_heads 4 head_dim 16 theta 1.000000e+04 :
// CHECK:      llm.attention {{.*}} layer 1 {{.*}} causal window 8 :
// CHECK:      %[[QG:.*]] = llm.rope {{.*}} num_heads 4 head_dim 16 theta 1.000000e+06 scaling <linear, factor = 8.000000e+00> :
// CHECK-NEXT: %[[KG:.*]] = llm.rope {{.*}} num_heads 2 head_dim 16 theta 1.000000e+06 scaling <linear, factor = 8.000000e+00> :
// CHECK-NEXT: llm.attention %[[QG]], %[[KG]], %{{.*}} layer 2 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.20412414523193154 causal :
// CHECK:      %[[LNF:.*]] = llm.weight "model.norm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[HF:.*]] = llm.rms_norm %{{.*}}, %[[LNF]] eps {{.*}} offset 1.000000e+00 :
// CHECK-NEXT: llm.logits %[[HF]], %[[EMB]] : tensor<?x64xf32>, tensor<128x64xbf16> -> tensor<?x128xf32>

// 3 layers, 4 norms and 2 q/k norms each + the final one, all (1 + w).
// COUNT-COUNT-19: offset 1.000000e+00
// COUNT-NOT:      llm.rms_norm
// ABSENT-NOT: lm_head
// ABSENT-NOT: softcap
// ABSENT-NOT: llm.silu
