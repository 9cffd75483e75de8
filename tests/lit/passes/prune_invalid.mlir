// RUN: llm-opt %s --llm-prune --verify-diagnostics --split-input-file

// Tests that one weight name with two types is an error that points at both
// ops: the plan stores one tensor per name, so neither can be chosen.

func.func @conflicting_types(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  // expected-note@below {{the earlier llm.weight}}
  %w1 = llm.weight "w" : tensor<64x64xf32>
  // expected-error@below {{'llm.weight' op refers to weight 'w' as 'tensor<64x64xbf16>' but an earlier llm.weight has type 'tensor<64x64xf32>'}}
  %w2 = llm.weight "w" : tensor<64x64xbf16>
  %a = llm.linear %x, %w1 : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  %b = llm.linear %x, %w2 : tensor<?x64xf32>, tensor<64x64xbf16> -> tensor<?x64xf32>
  %s = llm.add %a, %b : tensor<?x64xf32>
  return %s : tensor<?x64xf32>
}
