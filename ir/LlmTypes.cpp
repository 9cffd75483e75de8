//===- LlmTypes.cpp - llm dialect types -----------------------------------===//

#include "ir/LlmTypes.h"

#include "ir/LlmDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#define GET_TYPEDEF_CLASSES
#include "ir/LlmTypes.cpp.inc"

using namespace mlir;

namespace llmc::llm {

void LlmDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "ir/LlmTypes.cpp.inc"
      >();
}

// !llm.q4<4096x11008, group = 128>
Type Q4Type::parse(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  SmallVector<int64_t, 2> dims;
  int64_t groupSize = 0;
  if (parser.parseLess() ||
      parser.parseDimensionList(dims, /*allowDynamic=*/false, /*withTrailingX=*/false) ||
      parser.parseComma() || parser.parseKeyword("group") || parser.parseEqual() ||
      parser.parseInteger(groupSize) || parser.parseGreater())
    return {};
  if (dims.size() != 2) {
    parser.emitError(loc, "'!llm.q4' expects rows x cols, got ") << dims.size() << " dimensions";
    return {};
  }
  return parser.getChecked<Q4Type>(loc, parser.getContext(), dims[0], dims[1], groupSize);
}

void Q4Type::print(AsmPrinter &printer) const {
  printer << '<' << getRows() << 'x' << getCols() << ", group = " << getGroupSize() << '>';
}

LogicalResult Q4Type::verify(function_ref<InFlightDiagnostic()> emitError, int64_t rows,
                             int64_t cols, int64_t groupSize) {
  if (rows <= 0 || cols <= 0)
    return emitError() << "'!llm.q4' needs a positive shape, got " << rows << "x" << cols;
  if (groupSize <= 0)
    return emitError() << "'!llm.q4' needs a positive group size, got " << groupSize;
  return success();
}

} // namespace llmc::llm
