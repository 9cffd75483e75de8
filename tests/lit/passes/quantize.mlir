// RUN: llm-opt %s --split-input-file --llm-quantize="method=rtn group-size=32" \
// RUN:   | FileCheck %s --check-prefix=RTN
// RUN: llm-opt %s --split-input-file --llm-quantize="method=awq group-size=64" \
// RUN:   | FileCheck %s --check-prefix=AWQ
// RUN: llm-opt %s --split-input-file --llm-quantize="method=awq scales-only=true" \
// RUN:   | FileCheck %s --check-prefix=SCALES
// RUN: llm-opt %s --split-input-file --llm-quantize="method=awq group-size=32 report=true" \
// RUN:   --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT

// Tests one Llama layer (GQA: 4 query heads, 2 kv heads, a v bias as
// Qwen2 has): RTN turns every linear weight into !llm.q4 named without
// ".weight" (the ragged 48-column down_proj input included) and leaves the
// logits table alone; AWQ also renames what absorbs the four groups' scales
// (both norms, v's bias; v_proj and up_proj become int4 anyway); scales-only
// keeps float weights and renames every rescaled one.

// REPORT: remark: llm-quantize: awq group 32: 7 linear weights -> int4 (86016 B -> 13568 B); 4 of 4 linear groups scaled, 3 weights renamed

// RTN-LABEL: func.func @layer
// RTN-DAG: %[[WQ:.*]] = llm.weight "l.q_proj" : !llm.q4<64x64, group = 32>
// RTN-DAG: %[[WD:.*]] = llm.weight "l.down_proj" : !llm.q4<64x48, group = 32>
// RTN-DAG: llm.weight "l.input_layernorm.weight" : tensor<64xf32>
// RTN-DAG: llm.weight "l.v_proj.bias" : tensor<32xf32>
// RTN-DAG: llm.linear %{{.*}}, %[[WQ]] : tensor<?x64xf32>, !llm.q4<64x64, group = 32> -> tensor<?x64xf32>
// RTN-DAG: llm.linear %{{.*}}, %[[WD]] : tensor<?x48xf32>, !llm.q4<64x48, group = 32> -> tensor<?x64xf32>
// RTN-DAG: llm.logits %{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<128x64xf32>
// RTN-NOT: .weight" : tensor<{{[0-9]+}}x

// AWQ-LABEL: func.func @layer
// AWQ-DAG: llm.weight "l.input_layernorm.weight.awq_scaled" : tensor<64xf32>
// AWQ-DAG: llm.weight "l.post_attention_layernorm.weight.awq_scaled" : tensor<64xf32>
// AWQ-DAG: llm.weight "l.v_proj.bias.awq_scaled" : tensor<32xf32>
// AWQ-DAG: llm.weight "l.v_proj" : !llm.q4<32x64, group = 64>
// AWQ-DAG: llm.weight "l.up_proj" : !llm.q4<48x64, group = 64>
// AWQ-DAG: llm.weight "l.o_proj" : !llm.q4<64x64, group = 64>
// AWQ-DAG: llm.weight "embed" : tensor<128x64xf32>
// AWQ-NOT: "l.input_layernorm.weight" :

// SCALES-LABEL: func.func @layer
// SCALES-DAG: llm.weight "l.input_layernorm.weight.awq_scaled" : tensor<64xf32>
// SCALES-DAG: llm.weight "l.q_proj.weight.awq_scaled" : tensor<64x64xf32>
// SCALES-DAG: llm.weight "l.v_proj.weight.awq_scaled" : tensor<32x64xf32>
// SCALES-DAG: llm.weight "l.v_proj.bias.awq_scaled" : tensor<32xf32>
// SCALES-DAG: llm.weight "l.o_proj.weight.awq_scaled" : tensor<64x64xf32>
// SCALES-DAG: llm.weight "l.up_proj.weight.awq_scaled" : tensor<48x64xf32>
// SCALES-DAG: llm.weight "l.down_proj.weight.awq_scaled" : tensor<64x48xf32>
// SCALES-NOT: !llm.q4
func.func @layer(%tokens: tensor<?xi32>, %pos: tensor<?xi32>) -> tensor<?x128xf32> {
  %emb = llm.weight "embed" : tensor<128x64xf32>
  %h0 = llm.embedding %tokens, %emb : tensor<?xi32>, tensor<128x64xf32> -> tensor<?x64xf32>
  %g1 = llm.weight "l.input_layernorm.weight" : tensor<64xf32>
  %x = llm.rms_norm %h0, %g1 eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
  %wq = llm.weight "l.q_proj.weight" : tensor<64x64xf32>
  %q = llm.linear %x, %wq : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %wk = llm.weight "l.k_proj.weight" : tensor<32x64xf32>
  %k = llm.linear %x, %wk : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  %wv = llm.weight "l.v_proj.weight" : tensor<32x64xf32>
  %bv = llm.weight "l.v_proj.bias" : tensor<32xf32>
  %v = llm.linear %x, %wv, %bv : tensor<?x64xf32>, tensor<32x64xf32>, tensor<32xf32> -> tensor<?x32xf32>
  %qr = llm.rope %q, %pos num_heads 4 head_dim 16 theta 1.0e4 : tensor<?x64xf32>, tensor<?xi32>
  %kr = llm.rope %k, %pos num_heads 2 head_dim 16 theta 1.0e4 : tensor<?x32xf32>, tensor<?xi32>
  %att = llm.attention %qr, %kr, %v layer 0 num_heads 4 num_kv_heads 2 head_dim 16 scale 0.25 causal
      : tensor<?x64xf32>, tensor<?x32xf32>, tensor<?x32xf32>
  %wo = llm.weight "l.o_proj.weight" : tensor<64x64xf32>
  %o = llm.linear %att, %wo : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %h1 = llm.add %h0, %o : tensor<?x64xf32>
  %g2 = llm.weight "l.post_attention_layernorm.weight" : tensor<64xf32>
  %y = llm.rms_norm %h1, %g2 eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
  %wg = llm.weight "l.gate_proj.weight" : tensor<48x64xf32>
  %gate = llm.linear %y, %wg : tensor<?x64xf32>, tensor<48x64xf32> -> tensor<?x48xf32>
  %wu = llm.weight "l.up_proj.weight" : tensor<48x64xf32>
  %up = llm.linear %y, %wu : tensor<?x64xf32>, tensor<48x64xf32> -> tensor<?x48xf32>
  %act = llm.silu %gate : tensor<?x48xf32>
  %prod = llm.mul %act, %up : tensor<?x48xf32>
  %wd = llm.weight "l.down_proj.weight" : tensor<64x48xf32>
  %down = llm.linear %prod, %wd : tensor<?x48xf32>, tensor<64x48xf32> -> tensor<?x64xf32>
  %h2 = llm.add %h1, %down : tensor<?x64xf32>
  %logits = llm.logits %h2, %emb : tensor<?x64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>
  return %logits : tensor<?x128xf32>
}

// -----

// Tests that a group whose input has another user (here the residual add)
// gets no AWQ scales: folding 1/s into the norm would change the add too.
// The weights still become int4, the norm keeps its name.

// REPORT: remark: llm-quantize: awq group 32: 1 linear weights -> int4 (16384 B -> 2560 B); 0 of 1 linear groups scaled, 0 weights renamed
// AWQ-LABEL: func.func @shared_input
// AWQ: llm.weight "n" : tensor<64xf32>
// AWQ: llm.weight "w" : !llm.q4<64x64, group = 64>
// SCALES-LABEL: func.func @shared_input
// SCALES: llm.weight "n" : tensor<64xf32>
// SCALES: llm.weight "w.weight" : tensor<64x64xf32>
func.func @shared_input(%h: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %g = llm.weight "n" : tensor<64xf32>
  %x = llm.rms_norm %h, %g eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
  %w = llm.weight "w.weight" : tensor<64x64xf32>
  %y = llm.linear %x, %w : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %s = llm.add %x, %y : tensor<?x64xf32>
  return %s : tensor<?x64xf32>
}

// -----

// Tests that weights already int4 are left alone (the pass is idempotent on
// them) and that a linear with no producer to fold into is only rounded.

// REPORT: remark: llm-quantize: awq group 32: 1 linear weights -> int4 (8192 B -> 1280 B); 0 of 1 linear groups scaled, 0 weights renamed
// RTN-LABEL: func.func @mixed
// RTN: llm.weight "a" : !llm.q4<64x64, group = 128>
// RTN: llm.weight "b" : !llm.q4<32x64, group = 32>
func.func @mixed(%x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x32xf32>) {
  %a = llm.weight "a" : !llm.q4<64x64, group = 128>
  %ya = llm.linear %x, %a : tensor<?x64xf32>, !llm.q4<64x64, group = 128> -> tensor<?x64xf32>
  %b = llm.weight "b.weight" : tensor<32x64xf32>
  %yb = llm.linear %x, %b : tensor<?x64xf32>, tensor<32x64xf32> -> tensor<?x32xf32>
  return %ya, %yb : tensor<?x64xf32>, tensor<?x32xf32>
}

// -----

// Tests that a whole-row llm.layer_norm is a sink: its weight and bias are
// both renamed (they divide by the scales of the group it feeds, here a
// parallel block's q and fc1), while a grouped one (per-head) is none.

// REPORT: remark: llm-quantize: awq group 32: 3 linear weights -> int4 (49152 B -> 7680 B); 1 of 2 linear groups scaled, 2 weights renamed
// AWQ-LABEL: func.func @layer_norm_sink
// AWQ-DAG: llm.weight "ln.weight.awq_scaled" : tensor<64xf32>
// AWQ-DAG: llm.weight "ln.bias.awq_scaled" : tensor<64xf32>
// AWQ-DAG: llm.weight "grouped.weight" : tensor<64xf32>
// SCALES-LABEL: func.func @layer_norm_sink
// SCALES-DAG: llm.weight "ln.weight.awq_scaled" : tensor<64xf32>
// SCALES-DAG: llm.weight "ln.bias.awq_scaled" : tensor<64xf32>
// SCALES-DAG: llm.weight "q.weight.awq_scaled" : tensor<64x64xf32>
// SCALES-DAG: llm.weight "fc1.weight.awq_scaled" : tensor<64x64xf32>
// SCALES-DAG: llm.weight "o.weight" : tensor<64x64xf32>
func.func @layer_norm_sink(%h: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>) {
  %w = llm.weight "ln.weight" : tensor<64xf32>
  %b = llm.weight "ln.bias" : tensor<64xf32>
  %x = llm.layer_norm %h, %w, %b eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<?x64xf32>
  %wq = llm.weight "q.weight" : tensor<64x64xf32>
  %q = llm.linear %x, %wq : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %wf = llm.weight "fc1.weight" : tensor<64x64xf32>
  %f = llm.linear %x, %wf : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %wg = llm.weight "grouped.weight" : tensor<64xf32>
  %g = llm.layer_norm %h, %wg eps 1.0e-5 group 16 : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xf32>
  %wo = llm.weight "o.weight" : tensor<64x64xf32>
  %o = llm.linear %g, %wo : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  return %q, %f, %o : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>
}
