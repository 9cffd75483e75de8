// RUN: llm-opt %s | llm-opt | FileCheck %s
// RUN: llm-opt %s --mlir-print-op-generic | llm-opt | FileCheck %s

// Tests that llm.layer_norm (with and without bias, whole rows and per-head
// groups with per-feature or shared scales) and llm.logits with a bias and a
// scale print in the custom form and parse back unchanged, from the custom
// and from the generic form; default attributes are not printed.

// CHECK-LABEL: func.func @layer_norms
func.func @layer_norms(%x: tensor<?x64xf32>) -> (tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>) {
  %w = llm.weight "norm.weight" : tensor<64xf32>
  %b = llm.weight "norm.bias" : tensor<64xf32>
  %wh = llm.weight "q_norm.weight" : tensor<4x16xf32>
  %ws = llm.weight "q_layernorm.weight" : tensor<16xbf16>
  %bs = llm.weight "q_layernorm.bias" : tensor<16xbf16>
  // CHECK: llm.layer_norm %{{.*}}, %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<?x64xf32>{{$}}
  %n = llm.layer_norm %x, %w, %b eps 1.0e-5 : tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32> -> tensor<?x64xf32>
  // CHECK: llm.layer_norm %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xf32>{{$}}
  %n1 = llm.layer_norm %x, %w eps 1.0e-5 group 0 : tensor<?x64xf32>, tensor<64xf32> -> tensor<?x64xf32>
  // CHECK: llm.layer_norm %{{.*}}, %{{.*}} eps 1.000000e-05 group 16 : tensor<?x64xf32>, tensor<4x16xf32> -> tensor<?x64xf32>{{$}}
  %n2 = llm.layer_norm %x, %wh eps 1.0e-5 group 16 : tensor<?x64xf32>, tensor<4x16xf32> -> tensor<?x64xf32>
  // CHECK: llm.layer_norm %{{.*}}, %{{.*}}, %{{.*}} eps 1.000000e-05 group 16 : tensor<?x64xf32>, tensor<16xbf16>, tensor<16xbf16> -> tensor<?x64xf32>{{$}}
  %n3 = llm.layer_norm %x, %ws, %bs eps 1.0e-5 group 16 : tensor<?x64xf32>, tensor<16xbf16>, tensor<16xbf16> -> tensor<?x64xf32>
  return %n, %n1, %n2, %n3 : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x64xf32>
}

// CHECK-LABEL: func.func @logits_bias_scale
func.func @logits_bias_scale(%x: tensor<?x64xf32>) -> (tensor<?x100xf32>, tensor<?x100xf32>, tensor<?x100xf32>) {
  %w = llm.weight "lm_head.weight" : tensor<100x64xf32>
  %b = llm.weight "lm_head.bias" : tensor<100xf32>
  // CHECK: llm.logits %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<100x64xf32>, tensor<100xf32> -> tensor<?x100xf32>{{$}}
  %l = llm.logits %x, %w, %b : tensor<?x64xf32>, tensor<100x64xf32>, tensor<100xf32> -> tensor<?x100xf32>
  // CHECK: llm.logits %{{.*}}, %{{.*}} scale 6.250000e-02 softcap 3.000000e+01 : tensor<?x64xf32>, tensor<100x64xf32> -> tensor<?x100xf32>{{$}}
  %s = llm.logits %x, %w scale 0.0625 softcap 30.0 : tensor<?x64xf32>, tensor<100x64xf32> -> tensor<?x100xf32>
  // CHECK: llm.logits %{{.*}}, %{{.*}} : tensor<?x64xf32>, tensor<100x64xf32> -> tensor<?x100xf32>{{$}}
  %p = llm.logits %x, %w scale 1.0 : tensor<?x64xf32>, tensor<100x64xf32> -> tensor<?x100xf32>
  return %l, %s, %p : tensor<?x100xf32>, tensor<?x100xf32>, tensor<?x100xf32>
}
