// RUN: not llm-opt %s 2>&1 | FileCheck %s

// Tests that llm-opt rejects invalid IR with a non-zero exit and a message
// that points at the file, line and column of the op.

func.func @forward(%x: tensor<?x128xf32>) {
  %w = llm.weight "model.layers.0.mlp.down_proj.weight" : tensor<64x160xf32>
  // CHECK: cli_errors.mlir:[[@LINE+1]]:8: error: 'llm.linear' op weight has 160 input features but input has 128
  %y = llm.linear %x, %w : tensor<?x128xf32>, tensor<64x160xf32> -> tensor<?x64xf32>
  return
}
