// RUN: llmc build %llmc_assets/stories260k --emit mlir > %t.mlir
// RUN: FileCheck %s < %t.mlir
// RUN: FileCheck %s --check-prefix=COUNT < %t.mlir
// RUN: FileCheck %s --check-prefix=WEIGHTS < %t.mlir
// RUN: llm-opt %t.mlir | FileCheck %s

// Tests the IR of stories260K (assets/stories260k, real weights bundled with llmc):
// H = 64, 8 query heads and 4 kv heads of D = 8 (GQA: k and v are 32 wide),
// MLP 172, vocabulary 512, 5 layers, f32, no rope scaling, tied embeddings:
// the logits reuse the embedding's llm.weight and there is no lm_head. The
// printed IR parses and verifies again (last RUN line).

// CHECK-LABEL: func.func @forward(%arg0: tensor<?xi32>, %arg1: tensor<?xi32>) -> tensor<?x512xf32>
// CHECK-NEXT: %[[EMB:.*]] = llm.weight "model.embed_tokens.weight" : tensor<512x64xf32>
// CHECK-NEXT: %[[H0:.*]] = llm.embedding %arg0, %[[EMB]] : tensor<?xi32>, tensor<512x64xf32> -> tensor<?x64xf32>
// CHECK-NEXT: %[[LN1:.*]] = llm.weight "model.layers.0.input_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[X:.*]] = llm.rms_norm %[[H0]], %[[LN1]] eps 1.000000e-05 : tensor<?x64xf32>, tensor<64xf32>
// CHECK-NEXT: %[[WQ:.*]] = llm.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32>
// CHECK-NEXT: %[[Q:.*]] = llm.linear %[[X]], %[[WQ]] : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
// CHECK-NEXT: %[[WK:.*]] = llm.weight "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xf32>
// CHECK-NEXT: %[[K:.*]] = llm.linear %[[X]], %[[WK]] : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
// CHECK-NEXT: %[[WV:.*]] = llm.weight "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xf32>
// CHECK-NEXT: %[[V:.*]] = llm.linear %[[X]], %[[WV]] : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
// CHECK-NEXT: %[[QR:.*]] = llm.rope %[[Q]], %arg1 num_heads 8 head_dim 8 theta 1.000000e+04 : tensor<?x64xf32>, tensor<?xi32>
// CHECK-NEXT: %[[KR:.*]] = llm.rope %[[K]], %arg1 num_heads 4 head_dim 8 theta 1.000000e+04 : tensor<?x32xf32>, tensor<?xi32>
// CHECK-NEXT: %[[ATT:.*]] = llm.attention %[[QR]], %[[KR]], %[[V]] layer 0 num_heads 8 num_kv_heads 4 head_dim 8 scale 0.35355339059327373 causal : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
// CHECK-NEXT: %[[WO:.*]] = llm.weight "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xf32>
// CHECK-NEXT: %[[O:.*]] = llm.linear %[[ATT]], %[[WO]] : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
// CHECK-NEXT: %[[H1:.*]] = llm.add %[[H0]], %[[O]] : tensor<?x64xf32>
// CHECK-NEXT: %[[LN2:.*]] = llm.weight "model.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[Y:.*]] = llm.rms_norm %[[H1]], %[[LN2]] eps 1.000000e-05 : tensor<?x64xf32>, tensor<64xf32>
// CHECK-NEXT: %[[WG:.*]] = llm.weight "model.layers.0.mlp.gate_proj.weight" : tensor<172x64xf32>
// CHECK-NEXT: %[[G:.*]] = llm.linear %[[Y]], %[[WG]] : tensor<?x64xf32>, tensor<172x64xf32> -> tensor<?x172xf32>
// CHECK-NEXT: %[[WU:.*]] = llm.weight "model.layers.0.mlp.up_proj.weight" : tensor<172x64xf32>
// CHECK-NEXT: %[[U:.*]] = llm.linear %[[Y]], %[[WU]] : tensor<?x64xf32>, tensor<172x64xf32> -> tensor<?x172xf32>
// CHECK-NEXT: %[[ACT:.*]] = llm.silu %[[G]] : tensor<?x172xf32>
// CHECK-NEXT: %[[P:.*]] = llm.mul %[[ACT]], %[[U]] : tensor<?x172xf32>
// CHECK-NEXT: %[[WD:.*]] = llm.weight "model.layers.0.mlp.down_proj.weight" : tensor<64x172xf32>
// CHECK-NEXT: %[[D:.*]] = llm.linear %[[P]], %[[WD]] : tensor<?x172xf32>, tensor<64x172xf32> -> tensor<?x64xf32>
// CHECK-NEXT: %{{.*}} = llm.add %[[H1]], %[[D]] : tensor<?x64xf32>
// CHECK-NEXT: llm.weight "model.layers.1.input_layernorm.weight"
// CHECK:      llm.attention {{.*}} layer 4 num_heads 8 num_kv_heads 4 head_dim 8
// CHECK:      %[[LNF:.*]] = llm.weight "model.norm.weight" : tensor<64xf32>
// CHECK-NEXT: %[[HF:.*]] = llm.rms_norm %{{.*}}, %[[LNF]] eps 1.000000e-05
// CHECK-NEXT: %[[LOGITS:.*]] = llm.logits %[[HF]], %[[EMB]] : tensor<?x64xf32>, tensor<512x64xf32> -> tensor<?x512xf32>
// CHECK-NEXT: return %[[LOGITS]] : tensor<?x512xf32>

// Five layers: five attention ops, one per KV-cache layer.
// COUNT-COUNT-5: llm.attention
// COUNT-NOT:     llm.attention

// 47 weights, as in model.safetensors: 9 per layer, embedding and final norm,
// no lm_head.weight (tied).
// WEIGHTS-NOT:     lm_head
// WEIGHTS-COUNT-47: llm.weight
// WEIGHTS-NOT:     llm.weight
