// RUN: not llm-opt %s --llm-quantize="method=nf4" 2>&1 | FileCheck %s --check-prefix=METHOD
// RUN: not llm-opt %s --llm-quantize="group-size=0" 2>&1 | FileCheck %s --check-prefix=GROUP
// RUN: not llm-opt %s --llm-quantize="method=rtn scales-only=true" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SCALES

// Tests that the pass names the bad option and the values it accepts.

// METHOD: error: llm-quantize: method 'nf4' is not one of rtn, awq, gptq
// GROUP: error: llm-quantize: group-size must be positive, got 0
// SCALES: error: llm-quantize: scales-only needs method=awq
func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %w = llm.weight "w" : tensor<64x64xf32>
  %y = llm.linear %x, %w : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
