// RUN: llm-opt %s --split-input-file --llm-fuse-head | FileCheck %s
// RUN: llm-opt %s --split-input-file --llm-fuse-head=report=true --mlir-print-op-on-diagnostic=false \
// RUN:   -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT

// Tests that the final norm + logits become one llm.lm_head and that the
// function now also returns the greedy ids.

// REPORT: remark: llm-fuse-head: final norm + logits + argmax -> llm.lm_head (1 function)
// CHECK-LABEL: func.func @head
// CHECK-SAME: -> (tensor<?x512xf32>, tensor<?xi32>)
func.func @head(%h: tensor<?x64xf32>) -> tensor<?x512xf32> {
  // CHECK: %[[G:.*]] = llm.weight "model.norm.weight"
  // CHECK: %[[W:.*]] = llm.weight "lm_head.weight"
  // CHECK: %[[L:.*]], %[[I:.*]] = llm.lm_head %arg0, %[[G]], %[[W]] eps 1.000000e-05 : tensor<?x64xf32>, tensor<64xf32>, tensor<512x64xf32> -> tensor<?x512xf32>, tensor<?xi32>
  // CHECK: return %[[L]], %[[I]] : tensor<?x512xf32>, tensor<?xi32>
  // CHECK-NOT: llm.rms_norm
  %g = llm.weight "model.norm.weight" : tensor<64xf32>
  %hf = llm.rms_norm %h, %g eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
  %w = llm.weight "lm_head.weight" : tensor<512x64xf32>
  %l = llm.logits %hf, %w : tensor<?x64xf32>, tensor<512x64xf32> -> tensor<?x512xf32>
  return %l : tensor<?x512xf32>
}

// -----

// Tests that it must not fire when the normalized activation has another
// user (here it is returned too).

// REPORT: remark: llm-fuse-head: nothing to fuse
// CHECK-LABEL: func.func @norm_used_twice
// CHECK: llm.rms_norm
// CHECK: llm.logits
func.func @norm_used_twice(%h: tensor<?x64xf32>) -> (tensor<?x512xf32>, tensor<?x64xf32>) {
  %g = llm.weight "model.norm.weight" : tensor<64xf32>
  %hf = llm.rms_norm %h, %g eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
  %w = llm.weight "lm_head.weight" : tensor<512x64xf32>
  %l = llm.logits %hf, %w : tensor<?x64xf32>, tensor<512x64xf32> -> tensor<?x512xf32>
  return %l, %hf : tensor<?x512xf32>, tensor<?x64xf32>
}

// -----

// Tests that it must not fire when the logits feed another op, or are not
// f32, or are not normalized first.

// REPORT: remark: llm-fuse-head: nothing to fuse
// CHECK-LABEL: func.func @logits_used
// CHECK-NOT: llm.lm_head
func.func @logits_used(%h: tensor<?x64xf32>) -> tensor<?x512xf32> {
  %g = llm.weight "model.norm.weight" : tensor<64xf32>
  %hf = llm.rms_norm %h, %g eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
  %w = llm.weight "lm_head.weight" : tensor<512x64xf32>
  %l = llm.logits %hf, %w : tensor<?x64xf32>, tensor<512x64xf32> -> tensor<?x512xf32>
  %s = llm.silu %l : tensor<?x512xf32>
  return %s : tensor<?x512xf32>
}
// CHECK-LABEL: func.func @bf16_logits
// CHECK-NOT: llm.lm_head
func.func @bf16_logits(%h: tensor<?x64xf32>) -> tensor<?x512xbf16> {
  %g = llm.weight "model.norm.weight" : tensor<64xf32>
  %hf = llm.rms_norm %h, %g eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>
  %w = llm.weight "lm_head.weight" : tensor<512x64xf32>
  %l = llm.logits %hf, %w : tensor<?x64xf32>, tensor<512x64xf32> -> tensor<?x512xbf16>
  return %l : tensor<?x512xbf16>
}
// CHECK-LABEL: func.func @no_norm
// CHECK-NOT: llm.lm_head
func.func @no_norm(%h: tensor<?x64xf32>) -> tensor<?x512xf32> {
  %w = llm.weight "lm_head.weight" : tensor<512x64xf32>
  %l = llm.logits %h, %w : tensor<?x64xf32>, tensor<512x64xf32> -> tensor<?x512xf32>
  return %l : tensor<?x512xf32>
}

// -----

// Tests that a (1 + w) final norm and final-logit soft-capping (Gemma 2)
// carry over into the fused head.

// REPORT: remark: llm-fuse-head: final norm + logits + argmax -> llm.lm_head (1 function)
// CHECK-LABEL: func.func @head_gemma
// CHECK: llm.lm_head %arg0, %{{.*}}, %{{.*}} eps 9.99{{.*}}E-7 offset 1.000000e+00 softcap 3.000000e+01 :
func.func @head_gemma(%h: tensor<?x64xf32>) -> tensor<?x512xf32> {
  %g = llm.weight "model.norm.weight" : tensor<64xf32>
  %hf = llm.rms_norm %h, %g eps 1.0e-6 offset 1.0 : tensor<?x64xf32>, tensor<64xf32>
  %w = llm.weight "model.embed_tokens.weight" : tensor<512x64xf32>
  %l = llm.logits %hf, %w softcap 30.0 : tensor<?x64xf32>, tensor<512x64xf32> -> tensor<?x512xf32>
  return %l : tensor<?x512xf32>
}
