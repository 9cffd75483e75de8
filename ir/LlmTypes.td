//===- LlmTypes.td - llm dialect types -------------------------*- tablegen -*-===//

#ifndef LLMC_IR_LLMTYPES_TD
#define LLMC_IR_LLMTYPES_TD

include "LlmDialect.td"
include "mlir/IR/AttrTypeBase.td"

class Llm_Type<string name, string typeMnemonic> : TypeDef<Llm_Dialect, name> {
  let mnemonic = typeMnemonic;
}

def Llm_Q4Type : Llm_Type<"Q4", "q4"> {
  let summary = "int4 weight matrix with per-group f16 scales and zeros (AWQ)";
  let description = [{
    A weight matrix of `rows` output features by `cols` input features,
    quantized to unsigned 4-bit integers in groups of `groupSize` consecutive
    input features: `w[n][k] = (q[n][k] - zero[n][g]) * scale[n][g]` with
    `g = k / groupSize`, scales and zeros f16, one per (row, group). The last
    group of a row may be shorter (`cols` need not be a multiple of
    `groupSize`). The packing in memory is decided by codegen; the type only
    fixes the math.

    Example: `!llm.q4<4096x11008, group = 128>`
  }];
  let parameters = (ins "int64_t":$rows, "int64_t":$cols, "int64_t":$groupSize);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Groups per row: ceil(cols / groupSize).
    int64_t getNumGroups() const {
      return (getCols() + getGroupSize() - 1) / getGroupSize();
    }
  }];
}

#endif // LLMC_IR_LLMTYPES_TD
