// RUN: llm-opt %s --split-input-file --verify-diagnostics

// Tests that every verifier of the llm dialect rejects what it must, with a
// message that names the op and both sides of the mismatch. One case per
// chunk.

//===----------------------------------------------------------------------===//
// !llm.q4 and #llm.rope_scaling
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'!llm.q4' needs a positive group size, got 0}}
func.func private @q4_group_zero(!llm.q4<64x64, group = 0>)

// -----

// expected-error @+1 {{'!llm.q4' expects rows x cols, got 3 dimensions}}
func.func private @q4_rank(!llm.q4<4x64x64, group = 32>)

// -----

// expected-error @+1 {{rope scaling 'llama3' needs 0 < low_freq_factor < high_freq_factor, got 4.000000e+00 and 1.000000e+00}}
func.func private @llama3_bounds() attributes {s = #llm.rope_scaling<llama3, factor = 8.0, low_freq_factor = 4.0, high_freq_factor = 1.0, original_max_position_embeddings = 8192>}

// -----

// expected-error @+1 {{rope scaling 'llama3' needs field 'original_max_position_embeddings'}}
func.func private @llama3_missing() attributes {s = #llm.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0>}

// -----

// expected-error @+1 {{rope scaling 'linear' has no field 'low_freq_factor'}}
func.func private @linear_extra() attributes {s = #llm.rope_scaling<linear, factor = 2.0, low_freq_factor = 1.0>}

// -----

// expected-error @+1 {{rope scaling 'linear' needs factor > 0, got 0.000000e+00}}
func.func private @linear_factor() attributes {s = #llm.rope_scaling<linear, factor = 0.0>}

// -----

// expected-error @+1 {{unknown rope scaling kind 'mrope', expected none, linear, llama3, dynamic, yarn or longrope}}
func.func private @unknown_kind() attributes {s = #llm.rope_scaling<mrope>}

// -----

// expected-error @+1 {{rope scaling 'yarn' needs field 'attention_factor'}}
func.func private @yarn_missing() attributes {s = #llm.rope_scaling<yarn, factor = 4.0, original_max_position_embeddings = 2048, beta_fast = 32.0, beta_slow = 1.0, truncate = true>}

// -----

// expected-error @+1 {{rope scaling 'yarn' needs attention_factor > 0, got 0.000000e+00}}
func.func private @yarn_attention_factor() attributes {s = #llm.rope_scaling<yarn, factor = 4.0, original_max_position_embeddings = 2048, beta_fast = 32.0, beta_slow = 1.0, truncate = true, attention_factor = 0.0>}

// -----

// expected-error @+1 {{rope scaling 'dynamic' needs original_max_position_embeddings > 0, got 0}}
func.func private @dynamic_original() attributes {s = #llm.rope_scaling<dynamic, factor = 2.0, original_max_position_embeddings = 0>}

// -----

// expected-error @+1 {{rope scaling 'longrope' needs short_factor and long_factor of one non-zero length, got 2 and 1}}
func.func private @longrope_lengths() attributes {s = #llm.rope_scaling<longrope, factor = 4.0, original_max_position_embeddings = 2048, attention_factor = 1.1, short_factor = [1.0, 1.0], long_factor = [2.0]>}

// -----

// expected-error @+1 {{rope scaling 'longrope' needs factors > 0, got -2.000000e+00}}
func.func private @longrope_sign() attributes {s = #llm.rope_scaling<longrope, factor = 4.0, original_max_position_embeddings = 2048, attention_factor = 1.1, short_factor = [1.0], long_factor = [-2.0]>}

// -----

//===----------------------------------------------------------------------===//
// llm.weight
//===----------------------------------------------------------------------===//

func.func @weight_empty_name() {
  // expected-error @+1 {{'llm.weight' op name must not be empty}}
  %w = llm.weight "" : tensor<64xf32>
  return
}

// -----

func.func @weight_dynamic() {
  // expected-error @+1 {{'llm.weight' op result must have a static shape, got 'tensor<?x64xf32>'}}
  %w = llm.weight "w" : tensor<?x64xf32>
  return
}

// -----

func.func @weight_dtype() {
  // expected-error @+1 {{'llm.weight' op result #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values or int4 weight matrix}}
  %w = llm.weight "w" : tensor<64xi8>
  return
}

// -----

//===----------------------------------------------------------------------===//
// llm.embedding
//===----------------------------------------------------------------------===//

func.func @embedding_table_rank(%tokens: tensor<?xi32>, %table: tensor<64xf32>) {
  // expected-error @+1 {{'llm.embedding' op operand #1 must be 2D tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<64xf32>'}}
  %h = llm.embedding %tokens, %table : tensor<?xi32>, tensor<64xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @embedding_token_dtype(%tokens: tensor<?xi64>, %table: tensor<128x64xf32>) {
  // expected-error @+1 {{'llm.embedding' op operand #0 must be 1D tensor of 32-bit signless integer values, but got 'tensor<?xi64>'}}
  %h = llm.embedding %tokens, %table : tensor<?xi64>, tensor<128x64xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @embedding_hidden(%tokens: tensor<?xi32>, %table: tensor<128x64xf32>) {
  // expected-error @+1 {{'llm.embedding' op result has 32 features but table has 64 columns}}
  %h = llm.embedding %tokens, %table : tensor<?xi32>, tensor<128x64xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @embedding_tokens(%tokens: tensor<4xi32>, %table: tensor<128x64xf32>) {
  // expected-error @+1 {{'llm.embedding' op result has 5 tokens but tokens has 4}}
  %h = llm.embedding %tokens, %table : tensor<4xi32>, tensor<128x64xf32> -> tensor<5x64xf32>
  return
}

// -----

func.func @embedding_dynamic_table(%tokens: tensor<?xi32>, %table: tensor<?x64xf32>) {
  // expected-error @+1 {{'llm.embedding' op table must have a static shape, got 'tensor<?x64xf32>'}}
  %h = llm.embedding %tokens, %table : tensor<?xi32>, tensor<?x64xf32> -> tensor<?x64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// llm.rms_norm
//===----------------------------------------------------------------------===//

func.func @rms_norm_weight(%x: tensor<?x64xf32>, %w: tensor<32xf32>) {
  // expected-error @+1 {{'llm.rms_norm' op weight has 32 elements but input has 64 features}}
  %y = llm.rms_norm %x, %w eps 1.0e-5 : tensor<?x64xf32>, tensor<32xf32>
  return
}

// -----

func.func @rms_norm_eps(%x: tensor<?x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'llm.rms_norm' op eps must be positive, got 0.000000e+00}}
  %y = llm.rms_norm %x, %w eps 0.0 : tensor<?x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @rms_norm_result(%x: tensor<?x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'llm.rms_norm' op result type 'tensor<?x64xf16>' does not match input type 'tensor<?x64xf32>'}}
  %y = llm.rms_norm %x, %w eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xf16>
  return
}

// -----

func.func @rms_norm_rank(%x: tensor<?xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'llm.rms_norm' op operand #0 must be 2D tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<?xf32>'}}
  %y = llm.rms_norm %x, %w eps 1.0e-5 : tensor<?xf32>, tensor<64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// llm.linear
//===----------------------------------------------------------------------===//

func.func @linear_k(%x: tensor<?x128xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+1 {{'llm.linear' op weight has 64 input features but input has 128}}
  %y = llm.linear %x, %w : tensor<?x128xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @linear_q4_k(%x: tensor<?x128xf16>, %w: !llm.q4<32x64, group = 32>) {
  // expected-error @+1 {{'llm.linear' op weight has 64 input features but input has 128}}
  %y = llm.linear %x, %w : tensor<?x128xf16>, !llm.q4<32x64, group = 32> -> tensor<?x32xf16>
  return
}

// -----

func.func @linear_bias(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'llm.linear' op bias has 64 elements but weight has 32 output features}}
  %y = llm.linear %x, %w, %b : tensor<?x64xf32>, tensor<32x64xf32>, tensor<64xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @linear_result(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+1 {{'llm.linear' op result has 64 features but weight has 32 output features}}
  %y = llm.linear %x, %w : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @linear_result_dtype(%x: tensor<?x64xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+1 {{'llm.linear' op result element type 'f16' does not match input element type 'f32'}}
  %y = llm.linear %x, %w : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf16>
  return
}

// -----

func.func @linear_dynamic_features(%x: tensor<?x?xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+1 {{'llm.linear' op input must have a static feature dimension, got 'tensor<?x?xf32>'}}
  %y = llm.linear %x, %w : tensor<?x?xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @linear_tokens(%x: tensor<4x64xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+1 {{'llm.linear' op result has 3 tokens but input has 4}}
  %y = llm.linear %x, %w : tensor<4x64xf32>, tensor<32x64xf32> -> tensor<3x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// llm.rope
//===----------------------------------------------------------------------===//

func.func @rope_features(%x: tensor<?x100xf32>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'llm.rope' op input has 100 features but num_heads * head_dim = 8 * 16 = 128}}
  %y = llm.rope %x, %pos num_heads 8 head_dim 16 theta 1.0e4 : tensor<?x100xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_rotary_dim(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'llm.rope' op rotary_dim must be 0 or even in [2, head_dim 16], got 7}}
  %y = llm.rope %x, %pos num_heads 4 head_dim 16 theta 1.0e4 rotary_dim 7 : tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_longrope_pairs(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'llm.rope' op longrope scaling has 2 factors per set but the op rotates 8 pairs}}
  %y = llm.rope %x, %pos num_heads 4 head_dim 16 theta 1.0e4 scaling <longrope, factor = 4.0, original_max_position_embeddings = 2048, attention_factor = 1.1, short_factor = [1.0, 1.0], long_factor = [2.0, 2.0]> : tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_odd_head_dim(%x: tensor<?x14xf32>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'llm.rope' op head_dim must be even, got 7}}
  %y = llm.rope %x, %pos num_heads 2 head_dim 7 theta 1.0e4 : tensor<?x14xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_positions(%x: tensor<4x64xf32>, %pos: tensor<5xi32>) {
  // expected-error @+1 {{'llm.rope' op positions has 5 tokens but input has 4}}
  %y = llm.rope %x, %pos num_heads 4 head_dim 16 theta 1.0e4 : tensor<4x64xf32>, tensor<5xi32>
  return
}

// -----

func.func @rope_positions_dtype(%x: tensor<?x64xf32>, %pos: tensor<?xf32>) {
  // expected-error @+1 {{'llm.rope' op operand #1 must be 1D tensor of 32-bit signless integer values, but got 'tensor<?xf32>'}}
  %y = llm.rope %x, %pos num_heads 4 head_dim 16 theta 1.0e4 : tensor<?x64xf32>, tensor<?xf32>
  return
}

// -----

func.func @rope_heads(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'llm.rope' op num_heads must be positive, got 0}}
  %y = llm.rope %x, %pos num_heads 0 head_dim 16 theta 1.0e4 : tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_theta(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'llm.rope' op theta must be positive, got -1.000000e+00}}
  %y = llm.rope %x, %pos num_heads 4 head_dim 16 theta -1.0 : tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_result(%x: tensor<?x64xf32>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'llm.rope' op result type 'tensor<?x64xbf16>' does not match input type 'tensor<?x64xf32>'}}
  %y = llm.rope %x, %pos num_heads 4 head_dim 16 theta 1.0e4 : tensor<?x64xf32>, tensor<?xi32> -> tensor<?x64xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// llm.attention
//===----------------------------------------------------------------------===//

func.func @attention_gqa(%q: tensor<?x96xf32>, %kv: tensor<?x64xf32>) {
  // expected-error @+1 {{'llm.attention' op num_heads 6 is not a multiple of num_kv_heads 4}}
  %o = llm.attention %q, %kv, %kv layer 0 num_heads 6 num_kv_heads 4 head_dim 16 scale 0.25 causal
      : tensor<?x96xf32>, tensor<?x64xf32>, tensor<?x64xf32>
  return
}

// -----

func.func @attention_q_head_dim(%q: tensor<?x64xf32>, %kv: tensor<?x32xf32>) {
  // expected-error @+1 {{'llm.attention' op q has 64 features but num_heads * head_dim = 4 * 8 = 32}}
  %o = llm.attention %q, %kv, %kv layer 0 num_heads 4 num_kv_heads 2 head_dim 8 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
  return
}

// -----

func.func @attention_k(%q: tensor<?x64xf32>, %k: tensor<?x64xf32>, %v: tensor<?x32xf32>) {
  // expected-error @+1 {{'llm.attention' op k has 64 features but num_kv_heads * head_dim = 2 * 16 = 32}}
  %o = llm.attention %q, %k, %v layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x32xf32>
  return
}

// -----

func.func @attention_v(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %v: tensor<?x48xf32>) {
  // expected-error @+1 {{'llm.attention' op v has 48 features but num_kv_heads * head_dim = 2 * 16 = 32}}
  %o = llm.attention %q, %k, %v layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x48xf32>
  return
}

// -----

func.func @attention_dtype(%q: tensor<?x64xf32>, %k: tensor<?x32xf16>, %v: tensor<?x32xf32>) {
  // expected-error @+1 {{'llm.attention' op k element type 'f16' does not match q element type 'f32'}}
  %o = llm.attention %q, %k, %v layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x32xf16>, tensor<?x32xf32>
  return
}

// -----

func.func @attention_tokens(%q: tensor<4x64xf32>, %kv: tensor<5x32xf32>) {
  // expected-error @+1 {{'llm.attention' op k has 5 tokens but q has 4}}
  %o = llm.attention %q, %kv, %kv layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
      : tensor<4x64xf32>, tensor<5x32xf32>, tensor<5x32xf32>
  return
}

// -----

func.func @attention_layer(%q: tensor<?x64xf32>, %kv: tensor<?x32xf32>) {
  // expected-error @+1 {{'llm.attention' op layer must be non-negative, got -1}}
  %o = llm.attention %q, %kv, %kv layer -1 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
  return
}

// -----

func.func @attention_kv_heads(%q: tensor<?x64xf32>, %kv: tensor<?x32xf32>) {
  // expected-error @+1 {{'llm.attention' op num_kv_heads must be positive, got 0}}
  %o = llm.attention %q, %kv, %kv layer 0 num_heads 4 num_kv_heads 0 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
  return
}

// -----

func.func @attention_scale(%q: tensor<?x64xf32>, %kv: tensor<?x32xf32>) {
  // expected-error @+1 {{'llm.attention' op scale must be positive, got 0.000000e+00}}
  %o = llm.attention %q, %kv, %kv layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.0 causal
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
  return
}

// -----

func.func @attention_result(%q: tensor<?x64xf32>, %kv: tensor<?x32xf32>) {
  // expected-error @+1 {{'llm.attention' op result type 'tensor<?x32xf32>' does not match q type 'tensor<?x64xf32>'}}
  %o = llm.attention %q, %kv, %kv layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32> -> tensor<?x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// llm.add, llm.mul, llm.silu, llm.gelu
//===----------------------------------------------------------------------===//

func.func @add_shapes(%a: tensor<?x64xf32>, %b: tensor<?x32xf32>) {
  // expected-error @+1 {{'llm.add' op rhs type 'tensor<?x32xf32>' does not match lhs type 'tensor<?x64xf32>'}}
  %c = llm.add %a, %b : tensor<?x64xf32>, tensor<?x32xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @mul_dtypes(%a: tensor<?x64xf32>, %b: tensor<?x64xbf16>) {
  // expected-error @+1 {{'llm.mul' op rhs type 'tensor<?x64xbf16>' does not match lhs type 'tensor<?x64xf32>'}}
  %c = llm.mul %a, %b : tensor<?x64xf32>, tensor<?x64xbf16> -> tensor<?x64xf32>
  return
}

// -----

func.func @mul_result(%a: tensor<?x64xf32>) {
  // expected-error @+1 {{'llm.mul' op result type 'tensor<4x64xf32>' does not match lhs type 'tensor<?x64xf32>'}}
  %c = llm.mul %a, %a : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<4x64xf32>
  return
}

// -----

func.func @silu_result(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'llm.silu' op result type 'tensor<?x32xf32>' does not match input type 'tensor<?x64xf32>'}}
  %y = llm.silu %x : tensor<?x64xf32> -> tensor<?x32xf32>
  return
}

// -----

func.func @gelu_dynamic(%x: tensor<?x?xf32>) {
  // expected-error @+1 {{'llm.gelu' op input must have a static feature dimension, got 'tensor<?x?xf32>'}}
  %y = llm.gelu %x tanh : tensor<?x?xf32>
  return
}

// -----

func.func @gelu_dtype(%x: tensor<?x64xi32>) {
  // expected-error @+1 {{'llm.gelu' op operand #0 must be 2D tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<?x64xi32>'}}
  %y = llm.gelu %x : tensor<?x64xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// llm.logits
//===----------------------------------------------------------------------===//

func.func @logits_hidden(%x: tensor<?x64xf32>, %w: tensor<128x32xf32>) {
  // expected-error @+1 {{'llm.logits' op weight has 32 columns but input has 64 features}}
  %l = llm.logits %x, %w : tensor<?x64xf32>, tensor<128x32xf32> -> tensor<?x128xf32>
  return
}

// -----

func.func @logits_vocab(%x: tensor<?x64xf32>, %w: tensor<128x64xf32>) {
  // expected-error @+1 {{'llm.logits' op result has 100 features but weight has 128 vocabulary rows}}
  %l = llm.logits %x, %w : tensor<?x64xf32>, tensor<128x64xf32> -> tensor<?x100xf32>
  return
}

// -----

func.func @logits_q4(%x: tensor<?x64xf16>, %w: !llm.q4<128x64, group = 32>) {
  // expected-error @+1 {{'llm.logits' op operand #1 must be 2D tensor of 32-bit float or 16-bit float or bfloat16 type values, but got '!llm.q4<128x64, group = 32>'}}
  %l = "llm.logits"(%x, %w) : (tensor<?x64xf16>, !llm.q4<128x64, group = 32>) -> tensor<?x128xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// llm.fused_linear
//===----------------------------------------------------------------------===//

func.func @fused_no_weight(%x: tensor<?x64xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op needs at least one weight}}
  %y = "llm.fused_linear"(%x) {operand_segment_sizes = array<i32: 1, 0, 0, 0, 0>}
      : (tensor<?x64xf32>) -> tensor<?x64xf32>
  return
}

// -----

func.func @fused_weight_cols(%x: tensor<?x64xf32>, %a: tensor<64x64xf32>, %b: tensor<32x32xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op weight 1 has 32 input features but input has 64}}
  %p, %q = llm.fused_linear %x, [%a, %b] : tensor<?x64xf32>, [tensor<64x64xf32>, tensor<32x32xf32>]
      -> tensor<?x64xf32>, tensor<?x32xf32>
  return
}

// -----

func.func @fused_weight_dtype(%x: tensor<?x64xf32>, %a: tensor<64x64xf32>, %b: tensor<32x64xf16>) {
  // expected-error @+1 {{'llm.fused_linear' op weight 1 is f16 but weight 0 is f32 (fused weights are stored as one tensor)}}
  %p, %q = llm.fused_linear %x, [%a, %b] : tensor<?x64xf32>, [tensor<64x64xf32>, tensor<32x64xf16>]
      -> tensor<?x64xf32>, tensor<?x32xf32>
  return
}

// -----

func.func @fused_weight_dynamic(%x: tensor<?x64xf32>, %a: tensor<?x64xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op weight 0 must have a static shape, got 'tensor<?x64xf32>'}}
  %p = llm.fused_linear %x, [%a] : tensor<?x64xf32>, [tensor<?x64xf32>] -> tensor<?x64xf32>
  return
}

// -----

func.func @fused_bias_count(%x: tensor<?x64xf32>, %a: tensor<64x64xf32>, %b: tensor<32x64xf32>,
                            %ba: tensor<64xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op has 1 biases for 2 weights (one per weight, or none)}}
  %p, %q = llm.fused_linear %x, [%a, %b] bias [%ba]
      : tensor<?x64xf32>, [tensor<64x64xf32>, tensor<32x64xf32>] bias [tensor<64xf32>]
      -> tensor<?x64xf32>, tensor<?x32xf32>
  return
}

// -----

func.func @fused_bias_size(%x: tensor<?x64xf32>, %a: tensor<64x64xf32>, %b: tensor<32x64xf32>,
                           %ba: tensor<64xf32>, %bb: tensor<16xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op bias 1 has 16 elements but weight 1 has 32 output features}}
  %p, %q = llm.fused_linear %x, [%a, %b] bias [%ba, %bb]
      : tensor<?x64xf32>, [tensor<64x64xf32>, tensor<32x64xf32>] bias [tensor<64xf32>, tensor<16xf32>]
      -> tensor<?x64xf32>, tensor<?x32xf32>
  return
}

// -----

func.func @fused_bias_dtype(%x: tensor<?x64xf32>, %a: tensor<64x64xf32>, %b: tensor<32x64xf32>,
                            %ba: tensor<64xf32>, %bb: tensor<32xf16>) {
  // expected-error @+1 {{'llm.fused_linear' op bias 1 element type 'f16' does not match bias 0 element type 'f32'}}
  %p, %q = llm.fused_linear %x, [%a, %b] bias [%ba, %bb]
      : tensor<?x64xf32>, [tensor<64x64xf32>, tensor<32x64xf32>] bias [tensor<64xf32>, tensor<32xf16>]
      -> tensor<?x64xf32>, tensor<?x32xf32>
  return
}

// -----

func.func @fused_norm_without_eps(%x: tensor<?x64xf32>, %a: tensor<64x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op norm weight and eps go together}}
  %p = llm.fused_linear %x, [%a] norm %g : tensor<?x64xf32>, [tensor<64x64xf32>] norm tensor<64xf32>
      -> tensor<?x64xf32>
  return
}

// -----

func.func @fused_norm_size(%x: tensor<?x64xf32>, %a: tensor<64x64xf32>, %g: tensor<32xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op norm weight has 32 elements but input has 64 features}}
  %p = llm.fused_linear %x, [%a] norm %g eps 1.0e-5
      : tensor<?x64xf32>, [tensor<64x64xf32>] norm tensor<32xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @fused_norm_eps(%x: tensor<?x64xf32>, %a: tensor<64x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op eps must be positive, got 0}}
  %p = llm.fused_linear %x, [%a] norm %g eps 0.0
      : tensor<?x64xf32>, [tensor<64x64xf32>] norm tensor<64xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @fused_swiglu_count(%x: tensor<?x64xf32>, %a: tensor<64x64xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op swiglu needs 2 weights (gate, up), got 3}}
  %p = llm.fused_linear %x, [%a, %a, %a] swiglu
      : tensor<?x64xf32>, [tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>] -> tensor<?x64xf32>
  return
}

// -----

func.func @fused_swiglu_widths(%x: tensor<?x64xf32>, %g: tensor<160x64xf32>, %u: tensor<128x64xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op swiglu gate has 160 output features but up has 128}}
  %p = llm.fused_linear %x, [%g, %u] swiglu
      : tensor<?x64xf32>, [tensor<160x64xf32>, tensor<128x64xf32>] -> tensor<?x160xf32>
  return
}

// -----

func.func @fused_swiglu_bias(%x: tensor<?x64xf32>, %g: tensor<160x64xf32>, %b: tensor<160xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op swiglu takes no biases}}
  %p = llm.fused_linear %x, [%g, %g] bias [%b, %b] swiglu
      : tensor<?x64xf32>, [tensor<160x64xf32>, tensor<160x64xf32>] bias [tensor<160xf32>, tensor<160xf32>]
      -> tensor<?x160xf32>
  return
}

// -----

func.func @fused_result_count(%x: tensor<?x64xf32>, %a: tensor<64x64xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op has 1 results but expects 2}}
  %p = llm.fused_linear %x, [%a, %a] : tensor<?x64xf32>, [tensor<64x64xf32>, tensor<64x64xf32>]
      -> tensor<?x64xf32>
  return
}

// -----

func.func @fused_result_width(%x: tensor<?x64xf32>, %a: tensor<64x64xf32>, %b: tensor<32x64xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op result 1 has 16 features but expects 32}}
  %p, %q = llm.fused_linear %x, [%a, %b] : tensor<?x64xf32>, [tensor<64x64xf32>, tensor<32x64xf32>]
      -> tensor<?x64xf32>, tensor<?x16xf32>
  return
}

// -----

func.func @fused_result_dtype(%x: tensor<?x64xf32>, %a: tensor<64x64xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op result element type 'f16' does not match input element type 'f32'}}
  %p = llm.fused_linear %x, [%a] : tensor<?x64xf32>, [tensor<64x64xf32>] -> tensor<?x64xf16>
  return
}

// -----

func.func @fused_residual_results(%x: tensor<?x64xf32>, %a: tensor<64x64xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op residual needs exactly one result, got 2}}
  %p, %q = llm.fused_linear %x, [%a, %a] residual %x
      : tensor<?x64xf32>, [tensor<64x64xf32>, tensor<64x64xf32>] residual tensor<?x64xf32>
      -> tensor<?x64xf32>, tensor<?x64xf32>
  return
}

// -----

func.func @fused_residual_type(%x: tensor<?x64xf32>, %a: tensor<32x64xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op residual type 'tensor<?x64xf32>' does not match result type 'tensor<?x32xf32>'}}
  %p = llm.fused_linear %x, [%a] residual %x
      : tensor<?x64xf32>, [tensor<32x64xf32>] residual tensor<?x64xf32> -> tensor<?x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// llm.rope_attention
//===----------------------------------------------------------------------===//

func.func @rope_attention_layer(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'llm.rope_attention' op layer must be non-negative, got -1}}
  %o = llm.rope_attention %q, %k, %k, %pos layer -1 num_heads 4 num_kv_heads 2 head_dim 16
      theta 1.0e4 scale 0.25 causal : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_attention_theta(%q: tensor<?x64xf32>, %k: tensor<?x32xf32>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'llm.rope_attention' op theta must be positive, got 0}}
  %o = llm.rope_attention %q, %k, %k, %pos layer 0 num_heads 4 num_kv_heads 2 head_dim 16
      theta 0.0 scale 0.25 causal : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_attention_odd_dim(%q: tensor<?x63xf32>, %k: tensor<?x21xf32>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'llm.rope_attention' op head_dim must be even, got 21}}
  %o = llm.rope_attention %q, %k, %k, %pos layer 0 num_heads 3 num_kv_heads 1 head_dim 21
      theta 1.0e4 scale 0.25 : tensor<?x63xf32>, tensor<?x21xf32>, tensor<?x21xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_attention_gqa(%q: tensor<?x64xf32>, %k: tensor<?x48xf32>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'llm.rope_attention' op num_heads 4 is not a multiple of num_kv_heads 3}}
  %o = llm.rope_attention %q, %k, %k, %pos layer 0 num_heads 4 num_kv_heads 3 head_dim 16
      theta 1.0e4 scale 0.25 : tensor<?x64xf32>, tensor<?x48xf32>, tensor<?x48xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_attention_k(%q: tensor<?x64xf32>, %k: tensor<?x64xf32>, %pos: tensor<?xi32>) {
  // expected-error @+1 {{'llm.rope_attention' op k has 64 features but num_kv_heads * head_dim = 2 * 16 = 32}}
  %o = llm.rope_attention %q, %k, %k, %pos layer 0 num_heads 4 num_kv_heads 2 head_dim 16
      theta 1.0e4 scale 0.25 : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

func.func @rope_attention_positions(%q: tensor<5x64xf32>, %k: tensor<5x32xf32>, %pos: tensor<4xi32>) {
  // expected-error @+1 {{'llm.rope_attention' op positions has 4 tokens but q has 5}}
  %o = llm.rope_attention %q, %k, %k, %pos layer 0 num_heads 4 num_kv_heads 2 head_dim 16
      theta 1.0e4 scale 0.25 : tensor<5x64xf32>, tensor<5x32xf32>, tensor<5x32xf32>, tensor<4xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// llm.lm_head
//===----------------------------------------------------------------------===//

func.func @lm_head_norm(%x: tensor<?x64xf32>, %g: tensor<32xf32>, %w: tensor<128x64xf32>) {
  // expected-error @+1 {{'llm.lm_head' op norm weight has 32 elements but input has 64 features}}
  %l, %i = llm.lm_head %x, %g, %w eps 1.0e-5
      : tensor<?x64xf32>, tensor<32xf32>, tensor<128x64xf32> -> tensor<?x128xf32>, tensor<?xi32>
  return
}

// -----

func.func @lm_head_eps(%x: tensor<?x64xf32>, %g: tensor<64xf32>, %w: tensor<128x64xf32>) {
  // expected-error @+1 {{'llm.lm_head' op eps must be positive, got -1}}
  %l, %i = llm.lm_head %x, %g, %w eps -1.0
      : tensor<?x64xf32>, tensor<64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>, tensor<?xi32>
  return
}

// -----

func.func @lm_head_columns(%x: tensor<?x64xf32>, %g: tensor<64xf32>, %w: tensor<128x32xf32>) {
  // expected-error @+1 {{'llm.lm_head' op weight has 32 columns but input has 64 features}}
  %l, %i = llm.lm_head %x, %g, %w eps 1.0e-5
      : tensor<?x64xf32>, tensor<64xf32>, tensor<128x32xf32> -> tensor<?x128xf32>, tensor<?xi32>
  return
}

// -----

func.func @lm_head_vocab(%x: tensor<?x64xf32>, %g: tensor<64xf32>, %w: tensor<128x64xf32>) {
  // expected-error @+1 {{'llm.lm_head' op result has 100 features but weight has 128 vocabulary rows}}
  %l, %i = llm.lm_head %x, %g, %w eps 1.0e-5
      : tensor<?x64xf32>, tensor<64xf32>, tensor<128x64xf32> -> tensor<?x100xf32>, tensor<?xi32>
  return
}

// -----

func.func @lm_head_ids(%x: tensor<5x64xf32>, %g: tensor<64xf32>, %w: tensor<128x64xf32>) {
  // expected-error @+1 {{'llm.lm_head' op ids has 4 tokens but input has 5}}
  %l, %i = llm.lm_head %x, %g, %w eps 1.0e-5
      : tensor<5x64xf32>, tensor<64xf32>, tensor<128x64xf32> -> tensor<5x128xf32>, tensor<4xi32>
  return
}

// -----

func.func @fused_int4_group_sizes(%x: tensor<?x64xf32>) {
  %a = llm.weight "a" : !llm.q4<64x64, group = 32>
  %b = llm.weight "b" : !llm.q4<32x64, group = 64>
  // expected-error @+1 {{'llm.fused_linear' op weight 1 is int4 in groups of 64 but weight 0 is int4 in groups of 32 (fused weights are stored as one tensor)}}
  %p, %q = llm.fused_linear %x, [%a, %b]
      : tensor<?x64xf32>, [!llm.q4<64x64, group = 32>, !llm.q4<32x64, group = 64>]
      -> tensor<?x64xf32>, tensor<?x32xf32>
  return
}

// -----

func.func @fused_int4_with_float(%x: tensor<?x64xf32>, %b: tensor<32x64xf32>) {
  %a = llm.weight "a" : !llm.q4<64x64, group = 32>
  // expected-error @+1 {{'llm.fused_linear' op weight 1 is f32 but weight 0 is int4 in groups of 32}}
  %p, %q = llm.fused_linear %x, [%a, %b]
      : tensor<?x64xf32>, [!llm.q4<64x64, group = 32>, tensor<32x64xf32>]
      -> tensor<?x64xf32>, tensor<?x32xf32>
  return
}

// -----

func.func @negative_softcap(%q: tensor<?x64xf32>) {
  // expected-error @+1 {{'llm.attention' op softcap must be 0 (off) or a positive finite value, got -1}}
  %o = llm.attention %q, %q, %q layer 0 num_heads 4 num_kv_heads 4 head_dim 16 scale 0.25 causal
      softcap -1.0 : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>
  return
}

// -----

func.func @negative_window(%q: tensor<?x64xf32>, %p: tensor<?xi32>) {
  // expected-error @+1 {{'llm.rope_attention' op window must be 0 (off) or positive, got -3}}
  %o = llm.rope_attention %q, %q, %q, %p layer 0 num_heads 4 num_kv_heads 4 head_dim 16
      theta 1.0e4 scale 0.25 causal window -3
      : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?xi32>
  return
}

// -----

func.func @logits_softcap(%x: tensor<?x64xf32>, %w: tensor<100x64xf32>) {
  // expected-error @+1 {{'llm.logits' op softcap must be 0 (off) or a positive finite value, got -3.0}}
  %l = llm.logits %x, %w softcap -30.0 : tensor<?x64xf32>, tensor<100x64xf32> -> tensor<?x100xf32>
  return
}

// -----

func.func @embedding_zero_scale(%t: tensor<?xi32>, %e: tensor<100x64xf32>) {
  // expected-error @+1 {{'llm.embedding' op scale must be finite and non-zero, got 0}}
  %h = llm.embedding %t, %e scale 0.0 : tensor<?xi32>, tensor<100x64xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @norm_offset_without_norm(%x: tensor<?x64xf32>, %w: tensor<64x64xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op norm_offset needs a norm weight}}
  %y = llm.fused_linear %x, [%w] norm_offset 1.0
      : tensor<?x64xf32>, [tensor<64x64xf32>] -> tensor<?x64xf32>
  return
}

// -----

func.func @geglu_count(%x: tensor<?x64xf32>, %a: tensor<64x64xf32>) {
  // expected-error @+1 {{'llm.fused_linear' op geglu_tanh needs 2 weights (gate, up), got 1}}
  %p = llm.fused_linear %x, [%a] geglu_tanh : tensor<?x64xf32>, [tensor<64x64xf32>] -> tensor<?x64xf32>
  return
}
