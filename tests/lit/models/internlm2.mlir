// RUN: rm -rf %t && mkdir -p %t
// RUN: cp %S/Inputs/tokenizer.json %t/tokenizer.json
// RUN: echo '{"architectures": ["InternLM2ForCausalLM"], "model_type": "internlm2", \
// RUN:   "attn_implementation": "eager", "hidden_size": 64, "intermediate_size": 96, \
// RUN:   "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1, \
// RUN:   "vocab_size": 128, "max_position_embeddings": 256, "rms_norm_eps": 1e-05, \
// RUN:   "rope_scaling": {"type": "dynamic", "factor": 2.0}, "rope_theta": 1000000, \
// RUN:   "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2, \
// RUN:   "torch_dtype": "bfloat16"}' > %t/config.json
// RUN: llmc build %t --synthetic-weights --emit mlir > %t.mlir
// RUN: FileCheck %s < %t.mlir
// RUN: FileCheck %s --check-prefix=COUNT < %t.mlir
// RUN: FileCheck %s --check-prefix=WEIGHTS < %t.mlir
// RUN: FileCheck %s --check-prefix=ABSENT < %t.mlir
// RUN: llm-opt %t.mlir | FileCheck %s

// Tests the IR of an InternLM2 config (written above): no "bias" field, so
// InternLM2Config's default true puts biases on q, k, v (the parts of the
// packed wqkv) and o (wo); multi-query attention (4 heads per kv head);
// dynamic NTK RoPE from the legacy {"type", "factor"} rope_scaling. The
// graph is Llama's under Llama's names (the published tensors are split or
// renamed at import); untied, so the logits read lm_head (output.weight).

// CHECK-LABEL: func.func @forward(%arg0: tensor<?xi32>, %arg1: tensor<?xi32>) -> tensor<?x128xf32>
// CHECK-NEXT: %[[EMB:.*]] = llm.weight "model.embed_tokens.weight" : tensor<128x64xbf16>
// CHECK-NEXT: %[[X:.*]] = llm.embedding %arg0, %[[EMB]] : tensor<?xi32>, tensor<128x64xbf16> -> tensor<?x64xf32>
// CHECK-NEXT: %[[LN1:.*]] = llm.weight "model.layers.0.input_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[H:.*]] = llm.rms_norm %[[X]], %[[LN1]] eps 1.000000e-05 :
// CHECK-NEXT: %[[BQ:.*]] = llm.weight "model.layers.0.self_attn.q_proj.bias" : tensor<64xf32>
// CHECK-NEXT: %[[WQ:.*]] = llm.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xbf16>
// CHECK-NEXT: %[[Q:.*]] = llm.linear %[[H]], %[[WQ]], %[[BQ]]
// CHECK-NEXT: %[[BK:.*]] = llm.weight "model.layers.0.self_attn.k_proj.bias" : tensor<16xf32>
// CHECK-NEXT: %[[WK:.*]] = llm.weight "model.layers.0.self_attn.k_proj.weight" : tensor<16x64xbf16>
// CHECK-NEXT: %[[K:.*]] = llm.linear %[[H]], %[[WK]], %[[BK]]
// CHECK-NEXT: %[[BV:.*]] = llm.weight "model.layers.0.self_attn.v_proj.bias" : tensor<16xf32>
// CHECK-NEXT: %[[WV:.*]] = llm.weight "model.layers.0.self_attn.v_proj.weight" : tensor<16x64xbf16>
// CHECK-NEXT: %[[V:.*]] = llm.linear %[[H]], %[[WV]], %[[BV]]
// CHECK-NEXT: %[[QR:.*]] = llm.rope %[[Q]], %arg1 num_heads 4 head_dim 16 theta 1.000000e+06 scaling <dynamic, factor = 2.000000e+00, original_max_position_embeddings = 256> :
// CHECK-NEXT: %[[KR:.*]] = llm.rope %[[K]], %arg1 num_heads 1 head_dim 16 theta 1.000000e+06 scaling <dynamic, factor = 2.000000e+00, original_max_position_embeddings = 256> :
// CHECK-NEXT: %[[ATT:.*]] = llm.attention %[[QR]], %[[KR]], %[[V]] layer 0 num_heads 4 num_kv_heads 1 head_dim 16 scale 2.500000e-01 causal :
// CHECK-NEXT: %[[BO:.*]] = llm.weight "model.layers.0.self_attn.o_proj.bias" : tensor<64xf32>
// CHECK-NEXT: %[[WO:.*]] = llm.weight "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xbf16>
// CHECK-NEXT: %[[O:.*]] = llm.linear %[[ATT]], %[[WO]], %[[BO]]
// CHECK-NEXT: %[[R1:.*]] = llm.add %[[X]], %[[O]]
// CHECK-NEXT: %[[LN2:.*]] = llm.weight "model.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[H2:.*]] = llm.rms_norm %[[R1]], %[[LN2]] eps 1.000000e-05 :
// CHECK-NEXT: %[[WG:.*]] = llm.weight "model.layers.0.mlp.gate_proj.weight" : tensor<96x64xbf16>
// CHECK-NEXT: %[[G:.*]] = llm.linear %[[H2]], %[[WG]]
// CHECK-NEXT: %[[WU:.*]] = llm.weight "model.layers.0.mlp.up_proj.weight" : tensor<96x64xbf16>
// CHECK-NEXT: %[[U:.*]] = llm.linear %[[H2]], %[[WU]]
// CHECK-NEXT: %[[A:.*]] = llm.silu %[[G]]
// CHECK-NEXT: %[[M:.*]] = llm.mul %[[A]], %[[U]]
// CHECK-NEXT: %[[WD:.*]] = llm.weight "model.layers.0.mlp.down_proj.weight" : tensor<64x96xbf16>
// CHECK-NEXT: %[[D:.*]] = llm.linear %[[M]], %[[WD]]
// CHECK-NEXT: llm.add %[[R1]], %[[D]]
// CHECK:      llm.weight "model.norm.weight" : tensor<64xf32>
// CHECK:      %[[HEAD:.*]] = llm.weight "lm_head.weight" : tensor<128x64xbf16>
// CHECK-NEXT: llm.logits %{{.*}}, %[[HEAD]]

// COUNT-COUNT-2: llm.attention
// COUNT-NOT: llm.attention

// WEIGHTS-COUNT-29: llm.weight
// WEIGHTS-NOT: llm.weight

// ABSENT-NOT: wqkv
// ABSENT-NOT: output.weight
