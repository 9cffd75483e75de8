// RUN: rm -rf %t && mkdir -p %t
// RUN: cp %S/Inputs/tokenizer.json %t/tokenizer.json
// RUN: echo '{"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", \
// RUN:   "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, \
// RUN:   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 128, \
// RUN:   "max_position_embeddings": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, \
// RUN:   "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 24, \
// RUN:   "sliding_window": 8, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, \
// RUN:   "bos_token_id": 2, "eos_token_id": 1, "torch_dtype": "bfloat16"}' > %t/config.json
// RUN: llmc build %t --synthetic-weights --emit mlir > %t.mlir
// RUN: FileCheck %s < %t.mlir
// RUN: FileCheck %s --check-prefix=COUNT < %t.mlir
// RUN: FileCheck %s --check-prefix=ABSENT < %t.mlir
// RUN: llm-opt %t.mlir | FileCheck %s

// Tests the IR of a Gemma2 config (written above): embeddings times
// sqrt(64) = 8, every RMSNorm (1 + w) (offset 1), sandwich norms around
// attention and MLP before their residual adds, GeGLU as gelu tanh times
// up, scores scaled by 24^-0.5 and soft-capped at 50, layer 0 sliding over
// 8 tokens and layer 1 global (no layer_types: HF's even-layer default),
// logits soft-capped at 30 on the tied embedding table; bf16 matrices.

// CHECK-LABEL: func.func @forward(%arg0: tensor<?xi32>, %arg1: tensor<?xi32>) -> tensor<?x128xf32>
// CHECK-NEXT: %[[EMB:.*]] = llm.weight "model.embed_tokens.weight" : tensor<128x64xbf16>
// CHECK-NEXT: %[[X:.*]] = llm.embedding %arg0, %[[EMB]] scale 8.000000e+00 : tensor<?xi32>, tensor<128x64xbf16> -> tensor<?x64xf32>
// CHECK-NEXT: %[[LN1:.*]] = llm.weight "model.layers.0.input_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[H:.*]] = llm.rms_norm %[[X]], %[[LN1]] eps {{.*}} offset 1.000000e+00
// CHECK:      %[[ATT:.*]] = llm.attention {{.*}} layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.20412414523193154 causal softcap 5.000000e+01 window 8 :
// CHECK-NEXT: %[[WO:.*]] = llm.weight "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xbf16>
// CHECK-NEXT: %[[O:.*]] = llm.linear %[[ATT]], %[[WO]]
// CHECK-NEXT: %[[LN2:.*]] = llm.weight "model.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[ON:.*]] = llm.rms_norm %[[O]], %[[LN2]] eps {{.*}} offset 1.000000e+00
// CHECK-NEXT: %[[R1:.*]] = llm.add %[[X]], %[[ON]]
// CHECK-NEXT: %[[LN3:.*]] = llm.weight "model.layers.0.pre_feedforward_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[H2:.*]] = llm.rms_norm %[[R1]], %[[LN3]] eps {{.*}} offset 1.000000e+00
// CHECK-NEXT: %[[WG:.*]] = llm.weight "model.layers.0.mlp.gate_proj.weight" : tensor<96x64xbf16>
// CHECK-NEXT: %[[G:.*]] = llm.linear %[[H2]], %[[WG]]
// CHECK-NEXT: %[[WU:.*]] = llm.weight "model.layers.0.mlp.up_proj.weight" : tensor<96x64xbf16>
// CHECK-NEXT: %[[U:.*]] = llm.linear %[[H2]], %[[WU]]
// CHECK-NEXT: %[[A:.*]] = llm.gelu %[[G]] tanh : tensor<?x96xf32>
// CHECK-NEXT: %[[M:.*]] = llm.mul %[[A]], %[[U]]
// CHECK-NEXT: %[[WD:.*]] = llm.weight "model.layers.0.mlp.down_proj.weight" : tensor<64x96xbf16>
// CHECK-NEXT: %[[D:.*]] = llm.linear %[[M]], %[[WD]]
// CHECK-NEXT: %[[LN4:.*]] = llm.weight "model.layers.0.post_feedforward_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[DN:.*]] = llm.rms_norm %[[D]], %[[LN4]] eps {{.*}} offset 1.000000e+00
// CHECK-NEXT: llm.add %[[R1]], %[[DN]]
// Layer 1 is global: no window.
// CHECK:      llm.attention {{.*}} layer 1 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.20412414523193154 causal softcap 5.000000e+01 :
// CHECK:      %[[LNF:.*]] = llm.weight "model.norm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[HF:.*]] = llm.rms_norm %{{.*}}, %[[LNF]] eps {{.*}} offset 1.000000e+00
// CHECK-NEXT: llm.logits %[[HF]], %[[EMB]] softcap 3.000000e+01 : tensor<?x64xf32>, tensor<128x64xbf16> -> tensor<?x128xf32>

// 2 layers, 4 norms each + the final one, all (1 + w).
// COUNT-COUNT-9: offset 1.000000e+00
// COUNT-NOT:     llm.rms_norm
// ABSENT-NOT: lm_head
// ABSENT-NOT: llm.silu
