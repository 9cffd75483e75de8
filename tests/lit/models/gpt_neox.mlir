// RUN: rm -rf %t && mkdir -p %t
// RUN: cp %S/Inputs/tokenizer.json %t/tokenizer.json
// RUN: echo '{"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", \
// RUN:   "hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2, \
// RUN:   "num_attention_heads": 4, "vocab_size": 128, "max_position_embeddings": 256, \
// RUN:   "layer_norm_eps": 1e-05, "rotary_pct": 0.25, "rotary_emb_base": 10000, \
// RUN:   "use_parallel_residual": true, "tie_word_embeddings": false, "hidden_act": "gelu", \
// RUN:   "bos_token_id": 0, "eos_token_id": 0, "torch_dtype": "float16"}' > %t/config.json
// RUN: llmc build %t --synthetic-weights --emit mlir > %t.mlir
// RUN: FileCheck %s < %t.mlir
// RUN: FileCheck %s --check-prefix=COUNT < %t.mlir
// RUN: FileCheck %s --check-prefix=QKV < %t.mlir
// RUN: FileCheck %s --check-prefix=NORMS < %t.mlir
// RUN: FileCheck %s --check-prefix=ABSENT < %t.mlir
// RUN: llm-opt %t.mlir | FileCheck %s

// Tests the IR of a Pythia-style GPT-NeoX config (written above): q, k and v
// read the parts of the packed query_key_value split at import (":q", ":k",
// ":v", with their biases); LayerNorm with bias; a parallel residual whose
// MLP reads post_attention_layernorm of the block's input (not the attention
// output); rotary_pct 0.25 of D = 16 rotates 4 features; exact GELU between
// the biased dense_h_to_4h / dense_4h_to_h; the head in embed_out; 2 layers.

// CHECK-LABEL: func.func @forward(%arg0: tensor<?xi32>, %arg1: tensor<?xi32>) -> tensor<?x128xf32>
// CHECK-NEXT: %[[EMB:.*]] = llm.weight "gpt_neox.embed_in.weight" : tensor<128x64xf16>
// CHECK-NEXT: %[[X:.*]] = llm.embedding %arg0, %[[EMB]]
// CHECK-NEXT: %[[G1:.*]] = llm.weight "gpt_neox.layers.0.input_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[B1:.*]] = llm.weight "gpt_neox.layers.0.input_layernorm.bias" : tensor<64xf32>
// CHECK-NEXT: %[[H:.*]] = llm.layer_norm %[[X]], %[[G1]], %[[B1]] eps 1.000000e-05 : tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<?x64xf32>
// CHECK-NEXT: %[[BQ:.*]] = llm.weight "gpt_neox.layers.0.attention.query_key_value.bias:q" : tensor<64xf32>
// CHECK-NEXT: %[[WQ:.*]] = llm.weight "gpt_neox.layers.0.attention.query_key_value.weight:q" : tensor<64x64xf16>
// CHECK-NEXT: %[[Q:.*]] = llm.linear %[[H]], %[[WQ]], %[[BQ]]
// CHECK-NEXT: %[[BK:.*]] = llm.weight "gpt_neox.layers.0.attention.query_key_value.bias:k" : tensor<64xf32>
// CHECK-NEXT: %[[WK:.*]] = llm.weight "gpt_neox.layers.0.attention.query_key_value.weight:k" : tensor<64x64xf16>
// CHECK-NEXT: %[[K:.*]] = llm.linear %[[H]], %[[WK]], %[[BK]]
// CHECK-NEXT: %[[BV:.*]] = llm.weight "gpt_neox.layers.0.attention.query_key_value.bias:v" : tensor<64xf32>
// CHECK-NEXT: %[[WV:.*]] = llm.weight "gpt_neox.layers.0.attention.query_key_value.weight:v" : tensor<64x64xf16>
// CHECK-NEXT: %[[V:.*]] = llm.linear %[[H]], %[[WV]], %[[BV]]
// CHECK-NEXT: %[[QR:.*]] = llm.rope %[[Q]], %arg1 num_heads 4 head_dim 16 theta 1.000000e+04 rotary_dim 4 : tensor<?x64xf32>, tensor<?xi32>
// CHECK-NEXT: %[[KR:.*]] = llm.rope %[[K]], %arg1 num_heads 4 head_dim 16 theta 1.000000e+04 rotary_dim 4 : tensor<?x64xf32>, tensor<?xi32>
// CHECK-NEXT: %[[ATT:.*]] = llm.attention %[[QR]], %[[KR]], %[[V]] layer 0 num_heads 4 num_kv_heads 4 head_dim 16 scale 2.500000e-01 causal
// CHECK-NEXT: %[[BO:.*]] = llm.weight "gpt_neox.layers.0.attention.dense.bias" : tensor<64xf32>
// CHECK-NEXT: %[[WO:.*]] = llm.weight "gpt_neox.layers.0.attention.dense.weight" : tensor<64x64xf16>
// CHECK-NEXT: %[[O:.*]] = llm.linear %[[ATT]], %[[WO]], %[[BO]]
// CHECK-NEXT: %[[G2:.*]] = llm.weight "gpt_neox.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[B2:.*]] = llm.weight "gpt_neox.layers.0.post_attention_layernorm.bias" : tensor<64xf32>
// CHECK-NEXT: %[[H2:.*]] = llm.layer_norm %[[X]], %[[G2]], %[[B2]] eps 1.000000e-05
// CHECK-NEXT: %[[XO:.*]] = llm.add %[[X]], %[[O]] : tensor<?x64xf32>
// CHECK-NEXT: %[[BUP:.*]] = llm.weight "gpt_neox.layers.0.mlp.dense_h_to_4h.bias" : tensor<256xf32>
// CHECK-NEXT: %[[WUP:.*]] = llm.weight "gpt_neox.layers.0.mlp.dense_h_to_4h.weight" : tensor<256x64xf16>
// CHECK-NEXT: %[[UP:.*]] = llm.linear %[[H2]], %[[WUP]], %[[BUP]]
// CHECK-NEXT: %[[ACT:.*]] = llm.gelu %[[UP]] : tensor<?x256xf32>
// CHECK-NEXT: %[[BDN:.*]] = llm.weight "gpt_neox.layers.0.mlp.dense_4h_to_h.bias" : tensor<64xf32>
// CHECK-NEXT: %[[WDN:.*]] = llm.weight "gpt_neox.layers.0.mlp.dense_4h_to_h.weight" : tensor<64x256xf16>
// CHECK-NEXT: %[[DN:.*]] = llm.linear %[[ACT]], %[[WDN]], %[[BDN]]
// CHECK-NEXT: llm.add %[[XO]], %[[DN]] : tensor<?x64xf32>
// CHECK:      %[[GF:.*]] = llm.weight "gpt_neox.final_layer_norm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[BF:.*]] = llm.weight "gpt_neox.final_layer_norm.bias" : tensor<64xf32>
// CHECK-NEXT: %[[HF:.*]] = llm.layer_norm %{{.*}}, %[[GF]], %[[BF]] eps 1.000000e-05
// CHECK-NEXT: %[[HEAD:.*]] = llm.weight "embed_out.weight" : tensor<128x64xf16>
// CHECK-NEXT: %[[LOGITS:.*]] = llm.logits %[[HF]], %[[HEAD]] : tensor<?x64xf32>, tensor<128x64xf16> -> tensor<?x128xf32>
// CHECK-NEXT: return %[[LOGITS]]

// Two layers; 2 x 6 qkv parts, 2 norms per layer and the final one.
// COUNT-COUNT-2: llm.attention
// COUNT-NOT:     llm.attention
// QKV-COUNT-12:  query_key_value.{{weight|bias}}:{{q|k|v}}"
// QKV-NOT:       query_key_value
// NORMS-COUNT-5: llm.layer_norm
// NORMS-NOT:     llm.layer_norm

// The packed tensor itself is never read; no gated MLP, no rms_norm, no tied head.
// ABSENT-NOT: query_key_value.weight"
// ABSENT-NOT: llm.rms_norm
// ABSENT-NOT: llm.mul
// ABSENT-NOT: llm.silu
