//===- Passes.td - llmc passes over the llm dialect ------------*- tablegen -*-===//
//
// One record per pass, one passes/<Name>.cpp per record, one lit test
// tests/lit/passes/<name>.mlir per pass. The driver (compiler/driver/build.cpp)
// runs them in stages: prune, fuse, quantize, lower. `llm-opt --llm-<name>`
// runs any of them on a .mlir file.
//
//===----------------------------------------------------------------------===//

#ifndef LLMC_PASSES_TD
#define LLMC_PASSES_TD

include "mlir/Pass/PassBase.td"

def LlmPrune : Pass<"llm-prune", "mlir::ModuleOp"> {
  let summary = "Removes the weights and pure ops that no result needs and merges "
                "duplicate weight references.";
  let description = [{
    Three rewrites, in this order, in every block of the module:

    1. `llm.weight` ops with the same name and the same type are one weight:
       every later op is replaced by the first one. The same name with two
       different types is an error (the plan's tensor table is keyed by name).
    2. Ops without side effects whose results are all unused are erased,
       repeatedly, so that a chain feeding only dead ops goes too; unused
       `llm.weight` ops go with them. `llm.attention` writes the KV cache, so
       it stays even when its result is unused.
    3. The weights whose name no op refers to any more are reported with their
       size (elements x dtype), the bytes the plan no longer has to carry.

    With `report=true` the pass says what it removed in one remark; the
    driver prints the same under `llmc build -v`.

    Before:

    ```mlir
    func.func @forward(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
      %w1 = llm.weight "w" : tensor<64x64xf32>
      %w2 = llm.weight "w" : tensor<64x64xf32>
      %a = llm.linear %x, %w1 : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
      %b = llm.linear %x, %w2 : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
      %s = llm.add %a, %b : tensor<?x64xf32>
      %n = llm.weight "unused_norm" : tensor<64xf32>
      %dead = llm.rms_norm %x, %n eps 1.0e-6 : tensor<?x64xf32>, tensor<64xf32>
      return %s : tensor<?x64xf32>
    }
    ```

    After (`unused_norm`, 256 bytes, is no longer needed):

    ```mlir
    func.func @forward(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
      %w1 = llm.weight "w" : tensor<64x64xf32>
      %a = llm.linear %x, %w1 : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
      %b = llm.linear %x, %w1 : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
      %s = llm.add %a, %b : tensor<?x64xf32>
      return %s : tensor<?x64xf32>
    }
    ```

    The two `llm.linear` ops are now identical; `--cse`, which the driver's
    prune stage runs next, merges them.
  }];
  let dependentDialects = ["llmc::llm::LlmDialect"];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Emit a remark on the module that says what was removed">,
  ];
}

#endif // LLMC_PASSES_TD
