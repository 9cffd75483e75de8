// RUN: rm -rf %t && mkdir -p %t
// RUN: cp %S/Inputs/tokenizer.json %t/tokenizer.json
// RUN: echo '{"architectures": ["GraniteForCausalLM"], "model_type": "granite", \
// RUN:   "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, \
// RUN:   "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128, \
// RUN:   "max_position_embeddings": 256, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, \
// RUN:   "embedding_multiplier": 12.0, "attention_multiplier": 0.015625, \
// RUN:   "residual_multiplier": 0.22, "logits_scaling": 8.0, "mlp_bias": true, \
// RUN:   "tie_word_embeddings": true, "bos_token_id": 0, "eos_token_id": 0, \
// RUN:   "torch_dtype": "bfloat16"}' > %t/config.json
// RUN: llmc build %t --synthetic-weights --emit mlir > %t.mlir
// RUN: FileCheck %s < %t.mlir
// RUN: FileCheck %s --check-prefix=COUNT < %t.mlir
// RUN: FileCheck %s --check-prefix=ABSENT < %t.mlir
// RUN: llm-opt %t.mlir | FileCheck %s

// Tests the IR of a Granite config (written above): embeddings times
// embedding_multiplier 12, scores scaled by attention_multiplier (not
// head_dim^-0.5), o_proj and down_proj times residual_multiplier 0.22 before
// their residual adds, mlp_bias on gate/up/down, and the tied logits times
// 1 / logits_scaling.

// CHECK-LABEL: func.func @forward(%arg0: tensor<?xi32>, %arg1: tensor<?xi32>) -> tensor<?x128xf32>
// CHECK-NEXT: %[[EMB:.*]] = llm.weight "model.embed_tokens.weight" : tensor<128x64xbf16>
// CHECK-NEXT: %[[X:.*]] = llm.embedding %arg0, %[[EMB]] scale 1.200000e+01 : tensor<?xi32>, tensor<128x64xbf16> -> tensor<?x64xf32>
// CHECK:      %[[ATT:.*]] = llm.attention {{.*}} layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 1.562500e-02 causal :
// CHECK-NEXT: %[[WO:.*]] = llm.weight "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xbf16>
// CHECK-NEXT: %[[O:.*]] = llm.linear %[[ATT]], %[[WO]] scale 2.200000e-01 :
// CHECK-NEXT: %[[R1:.*]] = llm.add %[[X]], %[[O]]
// CHECK:      %[[BG:.*]] = llm.weight "model.layers.0.mlp.gate_proj.bias" : tensor<96xf32>
// CHECK-NEXT: %[[WG:.*]] = llm.weight "model.layers.0.mlp.gate_proj.weight" : tensor<96x64xbf16>
// CHECK-NEXT: %[[G:.*]] = llm.linear %{{.*}}, %[[WG]], %[[BG]] :
// CHECK:      %[[BD:.*]] = llm.weight "model.layers.0.mlp.down_proj.bias" : tensor<64xf32>
// CHECK-NEXT: %[[WD:.*]] = llm.weight "model.layers.0.mlp.down_proj.weight" : tensor<64x96xbf16>
// CHECK-NEXT: %[[D:.*]] = llm.linear %{{.*}}, %[[WD]], %[[BD]] scale 2.200000e-01 :
// CHECK-NEXT: llm.add %[[R1]], %[[D]]
// CHECK:      llm.logits %{{.*}}, %[[EMB]] scale 1.250000e-01 : tensor<?x64xf32>, tensor<128x64xbf16> -> tensor<?x128xf32>

// Two scaled projections per layer.
// COUNT-COUNT-4: scale 2.200000e-01
// COUNT-NOT:     scale 2.200000e-01
// ABSENT-NOT: lm_head
