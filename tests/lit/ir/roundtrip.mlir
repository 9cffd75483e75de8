// RUN: llm-opt %s | llm-opt | FileCheck %s
// RUN: llm-opt %s --mlir-print-op-generic | llm-opt | FileCheck %s

// Tests that a one-layer Llama (H = 64, 4 query heads and 2 kv heads of 16,
// MLP 160, vocabulary 128, tied embeddings) prints in the custom form and
// parses back unchanged, from the custom and from the generic form.

// CHECK-LABEL: func.func @forward
// CHECK-SAME:    (%[[TOKENS:.*]]: tensor<?xi32>, %[[POS:.*]]: tensor<?xi32>) -> tensor<?x128xf32>
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x128xf32> {
  // CHECK: %[[EMB:.*]] = llm.weight "model.embed_tokens.weight" : tensor<128x64xf32>
  // CHECK: %[[H0:.*]] = llm.embedding %[[TOKENS]], %[[EMB]] : tensor<?xi32>, tensor<128x64xf32> -> tensor<?x64xf32>
  %emb = llm.weight "model.embed_tokens.weight" : tensor<128x64xf32>
  %h0 = llm.embedding %tokens, %emb : tensor<?xi32>, tensor<128x64xf32> -> tensor<?x64xf32>

  // CHECK: %[[LN1:.*]] = llm.weight "model.layers.0.input_layernorm.weight" : tensor<64xf32>
  // CHECK: %[[X:.*]] = llm.rms_norm %[[H0]], %[[LN1]] eps 1.000000e-05 : tensor<?x64xf32>, tensor<64xf32>{{$}}
  %ln1 = llm.weight "model.layers.0.input_layernorm.weight" : tensor<64xf32>
  %x = llm.rms_norm %h0, %ln1 eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>

  // CHECK: %[[WQ:.*]] = llm.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32>
  // CHECK: %[[Q:.*]] = llm.linear %[[X]], %[[WQ]] : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  // CHECK: %[[WK:.*]] = llm.weight "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xf32>
  // CHECK: %[[BK:.*]] = llm.weight "model.layers.0.self_attn.k_proj.bias" : tensor<32xf32>
  // CHECK: %[[K:.*]] = llm.linear %[[X]], %[[WK]], %[[BK]] : tensor<?x64xf32>, tensor<32x64xf32>, tensor<32xf32> -> tensor<?x32xf32>
  // CHECK: %[[WV:.*]] = llm.weight "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xf32>
  // CHECK: %[[V:.*]] = llm.linear %[[X]], %[[WV]] : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  %wq = llm.weight "model.layers.0.self_attn.q_proj.weight" : tensor<64x64xf32>
  %q = llm.linear %x, %wq : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %wk = llm.weight "model.layers.0.self_attn.k_proj.weight" : tensor<32x64xf32>
  %bk = llm.weight "model.layers.0.self_attn.k_proj.bias" : tensor<32xf32>
  %k = llm.linear %x, %wk, %bk : tensor<?x64xf32>, tensor<32x64xf32>, tensor<32xf32> -> tensor<?x32xf32>
  %wv = llm.weight "model.layers.0.self_attn.v_proj.weight" : tensor<32x64xf32>
  %v = llm.linear %x, %wv : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>

  // CHECK: %[[QR:.*]] = llm.rope %[[Q]], %[[POS]] num_heads 4 head_dim 16 theta 5.000000e+05
  // CHECK-SAME: scaling <llama3, factor = 8.000000e+00, low_freq_factor = 1.000000e+00, high_freq_factor = 4.000000e+00, original_max_position_embeddings = 8192>
  // CHECK-SAME: : tensor<?x64xf32>, tensor<?xi32>{{$}}
  // CHECK: %[[KR:.*]] = llm.rope %[[K]], %[[POS]] num_heads 2 head_dim 16 theta 5.000000e+05 scaling <llama3, {{.*}}> : tensor<?x32xf32>, tensor<?xi32>{{$}}
  %qr = llm.rope %q, %positions num_heads 4 head_dim 16 theta 500000.0
      scaling <llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0,
               original_max_position_embeddings = 8192> : tensor<?x64xf32>, tensor<?xi32>
  %kr = llm.rope %k, %positions num_heads 2 head_dim 16 theta 500000.0
      scaling <llama3, original_max_position_embeddings = 8192, factor = 8.0,
               high_freq_factor = 4.0, low_freq_factor = 1.0> : tensor<?x32xf32>, tensor<?xi32>

  // CHECK: %[[ATT:.*]] = llm.attention %[[QR]], %[[KR]], %[[V]] layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 2.500000e-01 causal : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>{{$}}
  %att = llm.attention %qr, %kr, %v layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>

  // CHECK: %[[WO:.*]] = llm.weight "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xf32>
  // CHECK: %[[O:.*]] = llm.linear %[[ATT]], %[[WO]]
  // CHECK: %[[H1:.*]] = llm.add %[[H0]], %[[O]] : tensor<?x64xf32>{{$}}
  %wo = llm.weight "model.layers.0.self_attn.o_proj.weight" : tensor<64x64xf32>
  %o = llm.linear %att, %wo : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %h1 = llm.add %h0, %o : tensor<?x64xf32>

  // CHECK: %[[LN2:.*]] = llm.weight "model.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
  // CHECK: %[[Y:.*]] = llm.rms_norm %[[H1]], %[[LN2]] eps 1.000000e-05
  // CHECK: %[[GATE:.*]] = llm.linear %[[Y]], %{{.*}} : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  // CHECK: %[[UP:.*]] = llm.linear %[[Y]], %{{.*}} : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  // CHECK: %[[ACT:.*]] = llm.silu %[[GATE]] : tensor<?x160xf32>{{$}}
  // CHECK: %[[PROD:.*]] = llm.mul %[[ACT]], %[[UP]] : tensor<?x160xf32>{{$}}
  // CHECK: %[[DOWN:.*]] = llm.linear %[[PROD]], %{{.*}} : tensor<?x160xf32>, tensor<64x160xf32> -> tensor<?x64xf32>
  // CHECK: %[[H2:.*]] = llm.add %[[H1]], %[[DOWN]] : tensor<?x64xf32>{{$}}
  %ln2 = llm.weight "model.layers.0.post_attention_layernorm.weight" : tensor<64xf32>
  %y = llm.rms_norm %h1, %ln2 eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
  %wg = llm.weight "model.layers.0.mlp.gate_proj.weight" : tensor<160x64xf32>
  %gate = llm.linear %y, %wg : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %wu = llm.weight "model.layers.0.mlp.up_proj.weight" : tensor<160x64xf32>
  %up = llm.linear %y, %wu : tensor<?x64xf32>, tensor<160x64xf32> -> tensor<?x160xf32>
  %act = llm.silu %gate : tensor<?x160xf32>
  %prod = llm.mul %act, %up : tensor<?x160xf32>
  %wd = llm.weight "model.layers.0.mlp.down_proj.weight" : tensor<64x160xf32>
  %down = llm.linear %prod, %wd : tensor<?x160xf32>, tensor<64x160xf32> -> tensor<?x64xf32>
  %h2 = llm.add %h1, %down : tensor<?x64xf32>

  // Tied lm_head: the embedding's weight value is used again.
  // CHECK: %[[HF:.*]] = llm.rms_norm %[[H2]], %{{.*}} eps 1.000000e-05
  // CHECK: %[[LOGITS:.*]] = llm.logits %[[HF]], %[[EMB]] : tensor<?x64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>
  // CHECK: return %[[LOGITS]] : tensor<?x128xf32>
  %lnf = llm.weight "model.norm.weight" : tensor<64xf32>
  %hf = llm.rms_norm %h2, %lnf eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
  %logits = llm.logits %hf, %emb : tensor<?x64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>
  return %logits : tensor<?x128xf32>
}

// Tests the other forms: the q4 weight type, bf16/f16 activations with
// weights of another dtype, a static token count, the other rope scalings,
// non-causal attention, both GELUs.

// The attribute in its full form; fields parse in any order, print in one.
// CHECK-LABEL: func.func @variants
// CHECK-SAME: attributes {scaling = #llm.rope_scaling<linear, factor = 4.000000e+00>}
func.func @variants(%x: tensor<?x256xf16>, %t: tensor<5x64xbf16>, %pos: tensor<5xi32>)
    attributes {scaling = #llm.rope_scaling<linear, factor = 4.0>} {
  // CHECK: %[[Q4:.*]] = llm.weight "model.layers.0.mlp.up_proj" : !llm.q4<512x256, group = 128>
  // CHECK: llm.linear %{{.*}}, %[[Q4]] : tensor<?x256xf16>, !llm.q4<512x256, group = 128> -> tensor<?x512xf16>
  %q4 = llm.weight "model.layers.0.mlp.up_proj" : !llm.q4<512x256, group = 128>
  %a = llm.linear %x, %q4 : tensor<?x256xf16>, !llm.q4<512x256, group = 128> -> tensor<?x512xf16>

  // A ragged last group: 200 = 128 + 72.
  // CHECK: llm.weight "ragged" : !llm.q4<64x200, group = 128>
  %ragged = llm.weight "ragged" : !llm.q4<64x200, group = 128>

  // CHECK: llm.linear %{{.*}}, %{{.*}}, %{{.*}} : tensor<5x64xbf16>, tensor<32x64xf32>, tensor<32xf16> -> tensor<5x32xbf16>
  %w = llm.weight "w" : tensor<32x64xf32>
  %b = llm.weight "b" : tensor<32xf16>
  %c = llm.linear %t, %w, %b : tensor<5x64xbf16>, tensor<32x64xf32>, tensor<32xf16> -> tensor<5x32xbf16>

  // CHECK: llm.rope %{{.*}}, %{{.*}} num_heads 4 head_dim 16 theta 1.000000e+04 : tensor<5x64xbf16>, tensor<5xi32>{{$}}
  // CHECK: llm.rope %{{.*}}, %{{.*}} num_heads 4 head_dim 16 theta 1.000000e+04 scaling <linear, factor = 2.000000e+00> :
  // CHECK: llm.rope %{{.*}}, %{{.*}} num_heads 4 head_dim 16 theta 1.000000e+04 scaling <none> :
  %r0 = llm.rope %t, %pos num_heads 4 head_dim 16 theta 1.0e4 : tensor<5x64xbf16>, tensor<5xi32>
  %r1 = llm.rope %t, %pos num_heads 4 head_dim 16 theta 1.0e4 scaling <linear, factor = 2.0>
      : tensor<5x64xbf16>, tensor<5xi32>
  %r2 = llm.rope %t, %pos num_heads 4 head_dim 16 theta 1.0e4 scaling <none>
      : tensor<5x64xbf16>, tensor<5xi32>

  // The length-dependent and attention-factor scalings, partial and interleaved rotary.
  // CHECK: llm.rope %{{.*}} theta 1.000000e+04 scaling <dynamic, factor = 2.000000e+00, original_max_position_embeddings = 2048> :
  // CHECK: llm.rope %{{.*}} theta 1.000000e+04 scaling <yarn, factor = 4.000000e+00, original_max_position_embeddings = 2048, beta_fast = 3.200000e+01, beta_slow = 1.000000e+00, truncate = false, attention_factor = 1.250000e+00> rotary_dim 8 :
  // CHECK: llm.rope %{{.*}} theta 1.000000e+04 scaling <longrope, factor = 4.000000e+00, original_max_position_embeddings = 2048, attention_factor = 1.100000e+00, short_factor = [1.000000e+00, 1.500000e+00], long_factor = [2.000000e+00, 8.000000e+00]> rotary_dim 4 interleaved :
  %r3 = llm.rope %t, %pos num_heads 4 head_dim 16 theta 1.0e4
      scaling <dynamic, original_max_position_embeddings = 2048, factor = 2.0>
      : tensor<5x64xbf16>, tensor<5xi32>
  %r4 = llm.rope %t, %pos num_heads 4 head_dim 16 theta 1.0e4
      scaling <yarn, factor = 4.0, original_max_position_embeddings = 2048, beta_fast = 32.0,
               beta_slow = 1.0, truncate = false, attention_factor = 1.25> rotary_dim 8
      : tensor<5x64xbf16>, tensor<5xi32>
  %r5 = llm.rope %t, %pos num_heads 4 head_dim 16 theta 1.0e4
      scaling <longrope, factor = 4.0, original_max_position_embeddings = 2048,
               attention_factor = 1.1, short_factor = [1.0, 1.5], long_factor = [2.0, 8.0]>
      rotary_dim 4 interleaved : tensor<5x64xbf16>, tensor<5xi32>

  // CHECK: llm.attention %{{.*}} layer 3 num_heads 4 num_kv_heads 4 head_dim 16 scale 1.000000e+00 : tensor<5x64xbf16>, tensor<5x64xbf16>, tensor<5x64xbf16>{{$}}
  %o = llm.attention %r0, %r1, %r2 layer 3 num_heads 4 num_kv_heads 4 head_dim 16 scale 1.0
      : tensor<5x64xbf16>, tensor<5x64xbf16>, tensor<5x64xbf16>

  // CHECK: llm.gelu %{{.*}} : tensor<5x64xbf16>{{$}}
  // CHECK: llm.gelu %{{.*}} tanh : tensor<5x64xbf16>{{$}}
  %g0 = llm.gelu %o : tensor<5x64xbf16>
  %g1 = llm.gelu %o tanh : tensor<5x64xbf16>

  // CHECK: llm.embedding %{{.*}}, %{{.*}} : tensor<5xi32>, tensor<100x64xbf16> -> tensor<5x64xf16>
  // CHECK: llm.logits %{{.*}}, %{{.*}} : tensor<5x64xf16>, tensor<100x64xbf16> -> tensor<5x100xf32>
  %table = llm.weight "table" : tensor<100x64xbf16>
  %e = llm.embedding %pos, %table : tensor<5xi32>, tensor<100x64xbf16> -> tensor<5x64xf16>
  %l = llm.logits %e, %table : tensor<5x64xf16>, tensor<100x64xbf16> -> tensor<5x100xf32>
  return
}

// Tests the fused forms the fusion passes produce: a q/k/v GEMM with a norm
// prologue and Qwen2-style biases, a SwiGLU GEMM, residual epilogues, RoPE +
// attention, and the LM head with its argmax.

// CHECK-LABEL: func.func @fused
// CHECK-SAME:    -> (tensor<?x128xf32>, tensor<?xi32>)
func.func @fused(%h0: tensor<?x64xf32>, %positions: tensor<?xi32>) -> (tensor<?x128xf32>, tensor<?xi32>) {
  %ln1 = llm.weight "ln1" : tensor<64xf32>
  %wq = llm.weight "q" : tensor<64x64xf32>
  %wk = llm.weight "k" : tensor<32x64xf32>
  %wv = llm.weight "v" : tensor<32x64xf32>
  %bq = llm.weight "bq" : tensor<64xf32>
  %bk = llm.weight "bk" : tensor<32xf32>
  %bv = llm.weight "bv" : tensor<32xf32>
  // CHECK: %[[QKV:.*]]:3 = llm.fused_linear %{{.*}}, [%{{.*}}, %{{.*}}, %{{.*}}] bias [%{{.*}}, %{{.*}}, %{{.*}}] norm %{{.*}} eps 1.000000e-05 : tensor<?x64xf32>, [tensor<64x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>] bias [tensor<64xf32>, tensor<32xf32>, tensor<32xf32>] norm tensor<64xf32> -> tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>{{$}}
  %q, %k, %v = llm.fused_linear %h0, [%wq, %wk, %wv] bias [%bq, %bk, %bv] norm %ln1 eps 1.0e-5
      : tensor<?x64xf32>, [tensor<64x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>]
        bias [tensor<64xf32>, tensor<32xf32>, tensor<32xf32>] norm tensor<64xf32>
      -> tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
  // CHECK: %[[ATT:.*]] = llm.rope_attention %[[QKV]]#0, %[[QKV]]#1, %[[QKV]]#2, %{{.*}} layer 0 num_heads 4 num_kv_heads 2 head_dim 16 theta 5.000000e+05 scaling <llama3, factor = 8.000000e+00, low_freq_factor = 1.000000e+00, high_freq_factor = 4.000000e+00, original_max_position_embeddings = 8192> scale 2.500000e-01 causal : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?xi32>{{$}}
  %att = llm.rope_attention %q, %k, %v, %positions layer 0 num_heads 4 num_kv_heads 2 head_dim 16
      theta 500000.0 scaling <llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0,
                              original_max_position_embeddings = 8192>
      scale 0.25 causal : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?xi32>
  %wo = llm.weight "o" : tensor<64x64xf32>
  // CHECK: %[[H1:.*]] = llm.fused_linear %[[ATT]], [%{{.*}}] residual %{{.*}} : tensor<?x64xf32>, [tensor<64x64xf32>] residual tensor<?x64xf32> -> tensor<?x64xf32>{{$}}
  %h1 = llm.fused_linear %att, [%wo] residual %h0
      : tensor<?x64xf32>, [tensor<64x64xf32>] residual tensor<?x64xf32> -> tensor<?x64xf32>
  %ln2 = llm.weight "ln2" : tensor<64xf32>
  %wg = llm.weight "gate" : tensor<160x64xbf16>
  %wu = llm.weight "up" : tensor<160x64xbf16>
  // CHECK: %[[ACT:.*]] = llm.fused_linear %[[H1]], [%{{.*}}, %{{.*}}] norm %{{.*}} eps 1.000000e-05 swiglu : tensor<?x64xf32>, [tensor<160x64xbf16>, tensor<160x64xbf16>] norm tensor<64xf32> -> tensor<?x160xf32>{{$}}
  %act = llm.fused_linear %h1, [%wg, %wu] norm %ln2 eps 1.0e-5 swiglu
      : tensor<?x64xf32>, [tensor<160x64xbf16>, tensor<160x64xbf16>] norm tensor<64xf32>
      -> tensor<?x160xf32>
  %wd = llm.weight "down" : tensor<64x160xbf16>
  // CHECK: %[[H2:.*]] = llm.fused_linear %[[ACT]], [%{{.*}}] residual %[[H1]] :
  %h2 = llm.fused_linear %act, [%wd] residual %h1
      : tensor<?x160xf32>, [tensor<64x160xbf16>] residual tensor<?x64xf32> -> tensor<?x64xf32>
  %lnf = llm.weight "lnf" : tensor<64xf32>
  %head = llm.weight "head" : tensor<128x64xf32>
  // CHECK: %[[LOGITS:.*]], %[[IDS:.*]] = llm.lm_head %[[H2]], %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<?x64xf32>, tensor<64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>, tensor<?xi32>{{$}}
  // CHECK: return %[[LOGITS]], %[[IDS]]
  %logits, %ids = llm.lm_head %h2, %lnf, %head eps 1.0e-5
      : tensor<?x64xf32>, tensor<64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>, tensor<?xi32>
  return %logits, %ids : tensor<?x128xf32>, tensor<?xi32>
}

// The attributes of Gemma-style models, each printed only when it is not
// its default (0, or 1 for the embedding scale).
// CHECK-LABEL: func.func @gemma_attributes
func.func @gemma_attributes(%t: tensor<?xi32>, %x: tensor<?x64xf32>, %pos: tensor<?xi32>)
    -> (tensor<?x100xf32>, tensor<?x160xf32>, tensor<?x64xf32>, tensor<?x64xf32>) {
  %e = llm.weight "embed" : tensor<100x64xf32>
  %g = llm.weight "norm" : tensor<64xf32>
  %wg = llm.weight "gate" : tensor<160x64xf32>
  %wu = llm.weight "up" : tensor<160x64xf32>
  // CHECK: llm.embedding %arg0, %{{.*}} scale 8.000000e+00 : tensor<?xi32>, tensor<100x64xf32> -> tensor<?x64xf32>{{$}}
  %h = llm.embedding %t, %e scale 8.0 : tensor<?xi32>, tensor<100x64xf32> -> tensor<?x64xf32>
  // CHECK: llm.embedding %arg0, %{{.*}} : tensor<?xi32>, tensor<100x64xf32> -> tensor<?x64xf32>{{$}}
  %h1 = llm.embedding %t, %e scale 1.0 : tensor<?xi32>, tensor<100x64xf32> -> tensor<?x64xf32>
  // CHECK: llm.rms_norm %{{.*}}, %{{.*}} eps 9.9999999999999995E-7 offset 1.000000e+00 : tensor<?x64xf32>, tensor<64xf32>{{$}}
  %n = llm.rms_norm %h, %g eps 1.0e-6 offset 1.0 : tensor<?x64xf32>, tensor<64xf32>
  // CHECK: llm.rms_norm %{{.*}}, %{{.*}} eps 9.9999999999999995E-7 : tensor<?x64xf32>, tensor<64xf32>{{$}}
  %n0 = llm.rms_norm %h1, %g eps 1.0e-6 offset 0.0 : tensor<?x64xf32>, tensor<64xf32>
  // CHECK: llm.attention {{.*}} scale 2.500000e-01 causal softcap 5.000000e+01 window 16 : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>{{$}}
  %a = llm.attention %n, %n, %n layer 0 num_heads 4 num_kv_heads 4 head_dim 16 scale 0.25 causal
      softcap 50.0 window 16 : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>
  // CHECK: llm.rope_attention {{.*}} theta 1.000000e+04 scale 2.500000e-01 causal window 4 : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?xi32>{{$}}
  %ra = llm.rope_attention %n0, %n0, %n0, %pos layer 1 num_heads 4 num_kv_heads 4 head_dim 16
      theta 1.0e4 scale 0.25 causal window 4
      : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?xi32>
  // CHECK: llm.fused_linear %{{.*}}, [%{{.*}}, %{{.*}}] norm %{{.*}} eps 1.000000e-05 norm_offset 1.000000e+00 geglu_erf : tensor<?x64xf32>, [tensor<160x64xf32>, tensor<160x64xf32>] norm tensor<64xf32> -> tensor<?x160xf32>{{$}}
  %f = llm.fused_linear %x, [%wg, %wu] norm %g eps 1.0e-5 norm_offset 1.0 geglu_erf
      : tensor<?x64xf32>, [tensor<160x64xf32>, tensor<160x64xf32>] norm tensor<64xf32>
      -> tensor<?x160xf32>
  // CHECK: llm.logits %{{.*}}, %{{.*}} softcap 3.000000e+01 : tensor<?x64xf32>, tensor<100x64xf32> -> tensor<?x100xf32>{{$}}
  %l = llm.logits %a, %e softcap 30.0 : tensor<?x64xf32>, tensor<100x64xf32> -> tensor<?x100xf32>
  return %l, %f, %ra, %n0 : tensor<?x100xf32>, tensor<?x160xf32>, tensor<?x64xf32>, tensor<?x64xf32>
}
