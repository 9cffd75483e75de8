// RUN: llm-opt %s --split-input-file --verify-diagnostics

// Tests that the verifiers of llm.layer_norm and of llm.logits' bias and
// scale reject what they must, naming the op and both sides. One case per
// chunk.

func.func @layer_norm_weight_size(%x: tensor<?x64xf32>, %w: tensor<32xf32>) {
  // expected-error @+1 {{'llm.layer_norm' op weight has 32 elements but input has 64 features in groups of 64}}
  %n = llm.layer_norm %x, %w eps 1.0e-5 : tensor<?x64xf32>, tensor<32xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @layer_norm_bias_size(%x: tensor<?x64xf32>, %w: tensor<64xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{'llm.layer_norm' op bias has 16 elements but input has 64 features in groups of 64}}
  %n = llm.layer_norm %x, %w, %b eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>, tensor<16xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @layer_norm_group_divides(%x: tensor<?x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'llm.layer_norm' op group 24 must be 0 (whole rows) or divide the 64 input features}}
  %n = llm.layer_norm %x, %w eps 1.0e-5 group 24 : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @layer_norm_group_negative(%x: tensor<?x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'llm.layer_norm' op group -16 must be 0 (whole rows) or divide the 64 input features}}
  %n = llm.layer_norm %x, %w eps 1.0e-5 group -16 : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @layer_norm_eps(%x: tensor<?x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'llm.layer_norm' op eps must be positive, got 0}}
  %n = llm.layer_norm %x, %w eps 0.0 : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @layer_norm_rank(%x: tensor<?x64xf32>, %w: tensor<2x2x16xf32>) {
  // expected-error @+1 {{'llm.layer_norm' op weight must have rank 1 or 2, got 'tensor<2x2x16xf32>'}}
  %n = llm.layer_norm %x, %w eps 1.0e-5 : tensor<?x64xf32>, tensor<2x2x16xf32> -> tensor<?x64xf32>
  return
}

// -----

func.func @layer_norm_result(%x: tensor<?x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{'llm.layer_norm' op result type 'tensor<?x64xbf16>' does not match input type 'tensor<?x64xf32>'}}
  %n = llm.layer_norm %x, %w eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xbf16>
  return
}

// -----

func.func @logits_bias_size(%x: tensor<?x64xf32>, %w: tensor<128x64xf32>, %b: tensor<100xf32>) {
  // expected-error @+1 {{'llm.logits' op bias has 100 elements but weight has 128 vocabulary rows}}
  %l = llm.logits %x, %w, %b : tensor<?x64xf32>, tensor<128x64xf32>, tensor<100xf32> -> tensor<?x128xf32>
  return
}

// -----

func.func @logits_scale_zero(%x: tensor<?x64xf32>, %w: tensor<128x64xf32>) {
  // expected-error @+1 {{'llm.logits' op scale must be finite and non-zero, got 0}}
  %l = llm.logits %x, %w scale 0.0 : tensor<?x64xf32>, tensor<128x64xf32> -> tensor<?x128xf32>
  return
}
