// RUN: rm -rf %t && mkdir -p %t
// RUN: cp %S/Inputs/tokenizer.json %t/tokenizer.json
// RUN: echo '{"architectures": ["ExaoneForCausalLM"], "model_type": "exaone", \
// RUN:   "activation_function": "silu", "hidden_size": 64, "intermediate_size": 96, \
// RUN:   "num_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128, \
// RUN:   "max_position_embeddings": 256, "layer_norm_epsilon": 2e-05, "rope_scaling": null, \
// RUN:   "attention_bias": true, "tie_word_embeddings": true, \
// RUN:   "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"}' > %t/config.json
// RUN: llmc build %t --synthetic-weights --emit mlir > %t.mlir
// RUN: FileCheck %s < %t.mlir
// RUN: FileCheck %s --check-prefix=COUNT < %t.mlir
// RUN: FileCheck %s --check-prefix=WEIGHTS < %t.mlir
// RUN: FileCheck %s --check-prefix=ABSENT < %t.mlir
// RUN: llm-opt %t.mlir | FileCheck %s

// Tests the IR of an EXAONE 3.x config in LG's spelling (written above):
// num_layers gives the layer count, layer_norm_epsilon the RMSNorm eps,
// activation_function the SwiGLU; rope_theta is absent, so ExaoneConfig's
// 500000; attention_bias puts biases on q, k, v and out_proj (read as
// o_proj). The graph is Llama's, under Llama's tensor names (the published
// transformer.h.N.* tensors are renamed at import); tied, so no lm_head.

// CHECK-LABEL: func.func @forward(%arg0: tensor<?xi32>, %arg1: tensor<?xi32>) -> tensor<?x128xf32>
// CHECK-NEXT: %[[EMB:.*]] = llm.weight "model.embed_tokens.weight" : tensor<128x64xbf16>
// CHECK-NEXT: %[[X:.*]] = llm.embedding %arg0, %[[EMB]] : tensor<?xi32>, tensor<128x64xbf16> -> tensor<?x64xf32>
// CHECK-NEXT: %[[LN1:.*]] = llm.weight "model.layers.0.input_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[H:.*]] = llm.rms_norm %[[X]], %[[LN1]] eps 2.000000e-05 :
// CHECK-NEXT: %[[BQ:.*]] = llm.weight "model.layers.0.self_attn.q_proj.bias" : tensor<64xf32>
// CHECK-NEXT: %[[WQ:.*]] = llm.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xbf16>
// CHECK-NEXT: %[[Q:.*]] = llm.linear %[[H]], %[[WQ]], %[[BQ]]
// CHECK-NEXT: %[[BK:.*]] = llm.weight "model.layers.0.self_attn.k_proj.bias" : tensor<32xf32>
// CHECK-NEXT: %[[WK:.*]] = llm.weight "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xbf16>
// CHECK-NEXT: %[[K:.*]] = llm.linear %[[H]], %[[WK]], %[[BK]]
// CHECK-NEXT: %[[BV:.*]] = llm.weight "model.layers.0.self_attn.v_proj.bias" : tensor<32xf32>
// CHECK-NEXT: %[[WV:.*]] = llm.weight "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xbf16>
// CHECK-NEXT: %[[V:.*]] = llm.linear %[[H]], %[[WV]], %[[BV]]
// CHECK-NEXT: %[[QR:.*]] = llm.rope %[[Q]], %arg1 num_heads 4 head_dim 16 theta 5.000000e+05 :
// CHECK-NEXT: %[[KR:.*]] = llm.rope %[[K]], %arg1 num_heads 2 head_dim 16 theta 5.000000e+05 :
// CHECK-NEXT: %[[ATT:.*]] = llm.attention %[[QR]], %[[KR]], %[[V]] layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 2.500000e-01 causal :
// CHECK-NEXT: %[[BO:.*]] = llm.weight "model.layers.0.self_attn.o_proj.bias" : tensor<64xf32>
// CHECK-NEXT: %[[WO:.*]] = llm.weight "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xbf16>
// CHECK-NEXT: %[[O:.*]] = llm.linear %[[ATT]], %[[WO]], %[[BO]]
// CHECK-NEXT: %[[R1:.*]] = llm.add %[[X]], %[[O]]
// CHECK-NEXT: %[[LN2:.*]] = llm.weight "model.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[H2:.*]] = llm.rms_norm %[[R1]], %[[LN2]] eps 2.000000e-05 :
// CHECK-NEXT: %[[WG:.*]] = llm.weight "model.layers.0.mlp.gate_proj.weight" : tensor<96x64xbf16>
// CHECK-NEXT: %[[G:.*]] = llm.linear %[[H2]], %[[WG]]
// CHECK-NEXT: %[[WU:.*]] = llm.weight "model.layers.0.mlp.up_proj.weight" : tensor<96x64xbf16>
// CHECK-NEXT: %[[U:.*]] = llm.linear %[[H2]], %[[WU]]
// CHECK-NEXT: %[[A:.*]] = llm.silu %[[G]]
// CHECK-NEXT: %[[M:.*]] = llm.mul %[[A]], %[[U]]
// CHECK-NEXT: %[[WD:.*]] = llm.weight "model.layers.0.mlp.down_proj.weight" : tensor<64x96xbf16>
// CHECK-NEXT: %[[D:.*]] = llm.linear %[[M]], %[[WD]]
// CHECK-NEXT: llm.add %[[R1]], %[[D]]
// CHECK:      %[[NORM:.*]] = llm.weight "model.norm.weight" : tensor<64xf32>
// CHECK:      llm.logits %{{.*}}, %[[EMB]]

// COUNT-COUNT-3: llm.attention
// COUNT-NOT: llm.attention
// WEIGHTS-COUNT-41: llm.weight
// WEIGHTS-NOT: llm.weight

// ABSENT-NOT: lm_head
// ABSENT-NOT: transformer.
