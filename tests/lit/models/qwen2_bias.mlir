// RUN: rm -rf %t && mkdir -p %t
// RUN: cp %S/Inputs/tokenizer.json %t/tokenizer.json
// RUN: echo '{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", \
// RUN:   "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3, \
// RUN:   "num_attention_heads": 4, "num_key_value_heads": 1, "vocab_size": 128, \
// RUN:   "max_position_embeddings": 256, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, \
// RUN:   "use_sliding_window": false, "sliding_window": 256, "tie_word_embeddings": true, \
// RUN:   "bos_token_id": null, "eos_token_id": 2, "torch_dtype": "float16"}' > %t/config.json
// RUN: llmc build %t --synthetic-weights --emit mlir > %t.mlir
// RUN: FileCheck %s < %t.mlir
// RUN: FileCheck %s --check-prefix=COUNT < %t.mlir
// RUN: FileCheck %s --check-prefix=ABSENT < %t.mlir
// RUN: llm-opt %t.mlir | FileCheck %s
// RUN: llmc build %t --synthetic-weights=7 -o %t.plan -v 2>&1 | FileCheck %s --check-prefix=VERBOSE

// Tests the IR of a Qwen2 config (written above): q, k and v carry f32 biases
// and o_proj none; one kv head for 4 query heads of D = 16 (k and v 16
// wide); f16 matrices; no rope scaling; tied embeddings (the logits use the
// embedding's llm.weight, there is no lm_head); 3 layers.

// With -v every stage says what it changed; the builder leaves nothing to prune.
// 38 weights = 12 per layer + embedding + final norm (f16 matrices, f32 vectors).
// VERBOSE:      llmc: stage import {{.*}} Qwen2ForCausalLM: 3 layers, hidden 64, heads 4/1, vocab 128
// VERBOSE-NEXT: llmc: import: 38 weights referenced, 186.9 KiB (191360 B)
// VERBOSE-NEXT: llmc: stage prune {{.*}} 0 ops removed, 0 weights ({{.*}}) no longer needed
// VERBOSE-NEXT: llmc: prune: llm-prune nothing to do
// VERBOSE-NEXT: llmc: prune: canonicalize + cse removed 0 more ops
// VERBOSE:      llmc: fuse: llm-fuse-qkv: 3 q/k/v groups -> llm.fused_linear (9 llm.linear merged)
// VERBOSE:      llmc: stage lower {{.*}} 17 steps per token
// VERBOSE:      llmc: wrote {{.*}}.plan: {{.*}} synthetic

// CHECK-LABEL: func.func @forward(%arg0: tensor<?xi32>, %arg1: tensor<?xi32>) -> tensor<?x128xf32>
// CHECK-NEXT: %[[EMB:.*]] = llm.weight "model.embed_tokens.weight" : tensor<128x64xf16>
// CHECK:      %[[BQ:.*]] = llm.weight "model.layers.0.self_attn.q_proj.bias" : tensor<64xf32>
// CHECK-NEXT: %[[WQ:.*]] = llm.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf16>
// CHECK-NEXT: %[[Q:.*]] = llm.linear %{{.*}}, %[[WQ]], %[[BQ]] : tensor<?x64xf32>, tensor<64x64xf16>, tensor<64xf32> -> tensor<?x64xf32>
// CHECK-NEXT: %[[BK:.*]] = llm.weight "model.layers.0.self_attn.k_proj.bias" : tensor<16xf32>
// CHECK-NEXT: %[[WK:.*]] = llm.weight "model.layers.0.self_attn.k_proj.weight" : tensor<16x64xf16>
// CHECK-NEXT: %[[K:.*]] = llm.linear %{{.*}}, %[[WK]], %[[BK]] : tensor<?x64xf32>, tensor<16x64xf16>, tensor<16xf32> -> tensor<?x16xf32>
// CHECK-NEXT: %[[BV:.*]] = llm.weight "model.layers.0.self_attn.v_proj.bias" : tensor<16xf32>
// CHECK-NEXT: %[[WV:.*]] = llm.weight "model.layers.0.self_attn.v_proj.weight" : tensor<16x64xf16>
// CHECK-NEXT: %[[V:.*]] = llm.linear %{{.*}}, %[[WV]], %[[BV]] : tensor<?x64xf32>, tensor<16x64xf16>, tensor<16xf32> -> tensor<?x16xf32>
// CHECK-NEXT: %[[QR:.*]] = llm.rope %[[Q]], %arg1 num_heads 4 head_dim 16 theta 1.000000e+06 : tensor<?x64xf32>, tensor<?xi32>
// CHECK-NEXT: %[[KR:.*]] = llm.rope %[[K]], %arg1 num_heads 1 head_dim 16 theta 1.000000e+06 : tensor<?x16xf32>, tensor<?xi32>
// CHECK-NEXT: %[[ATT:.*]] = llm.attention %[[QR]], %[[KR]], %[[V]] layer 0 num_heads 4 num_kv_heads 1 head_dim 16 scale 2.500000e-01 causal : tensor<?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>
// CHECK-NEXT: %[[WO:.*]] = llm.weight "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xf16>
// CHECK-NEXT: llm.linear %[[ATT]], %[[WO]] : tensor<?x64xf32>, tensor<64x64xf16> -> tensor<?x64xf32>
// CHECK:      llm.attention {{.*}} layer 2 num_heads 4 num_kv_heads 1 head_dim 16
// CHECK:      %[[LNF:.*]] = llm.weight "model.norm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[HF:.*]] = llm.rms_norm %{{.*}}, %[[LNF]]
// CHECK-NEXT: %[[LOGITS:.*]] = llm.logits %[[HF]], %[[EMB]] : tensor<?x64xf32>, tensor<128x64xf16> -> tensor<?x128xf32>
// CHECK-NEXT: return %[[LOGITS]]

// Three layers of three biases each (q, k, v) and no other bias.
// COUNT-COUNT-9: _proj.bias" : tensor<{{16|64}}xf32>
// COUNT-NOT:     .bias"

// No o_proj bias, no rope scaling, no lm_head (tied).
// ABSENT-NOT: o_proj.bias
// ABSENT-NOT: scaling
// ABSENT-NOT: lm_head
