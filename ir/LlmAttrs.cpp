//===- LlmAttrs.cpp - llm dialect attributes ------------------------------===//

#include "ir/LlmAttrs.h"

#include "ir/LlmDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include "ir/LlmEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ir/LlmAttrs.cpp.inc"

using namespace mlir;

namespace llmc::llm {

void LlmDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ir/LlmAttrs.cpp.inc"
      >();
}

namespace {

constexpr StringLiteral kFactor = "factor";
constexpr StringLiteral kLowFreqFactor = "low_freq_factor";
constexpr StringLiteral kHighFreqFactor = "high_freq_factor";
constexpr StringLiteral kOriginalMax = "original_max_position_embeddings";

/// The fields a scaling kind uses, in printing order; the others keep their
/// defaults (factors 1, original max 0) and are not printed.
ArrayRef<StringLiteral> fieldsOf(RopeScalingKind kind) {
  static constexpr StringLiteral kLinear[] = {kFactor};
  static constexpr StringLiteral kLlama3[] = {kFactor, kLowFreqFactor, kHighFreqFactor,
                                              kOriginalMax};
  switch (kind) {
  case RopeScalingKind::None:
    return {};
  case RopeScalingKind::Linear:
    return kLinear;
  case RopeScalingKind::Llama3:
    return kLlama3;
  }
  llvm_unreachable("unknown RopeScalingKind");
}

struct ScalingFields {
  double factor = 1.0, lowFreqFactor = 1.0, highFreqFactor = 1.0;
  int64_t originalMax = 0;
};

ParseResult parseField(AsmParser &parser, StringRef field, ScalingFields &fields) {
  if (field == kFactor)
    return parser.parseFloat(fields.factor);
  if (field == kLowFreqFactor)
    return parser.parseFloat(fields.lowFreqFactor);
  if (field == kHighFreqFactor)
    return parser.parseFloat(fields.highFreqFactor);
  return parser.parseInteger(fields.originalMax);
}

} // namespace

// #llm.rope_scaling<llama3, factor = 8.0, low_freq_factor = 1.0, ...>
Attribute RopeScalingAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef kindName;
  if (parser.parseLess() || parser.parseKeyword(&kindName))
    return {};
  std::optional<RopeScalingKind> kind = symbolizeRopeScalingKind(kindName);
  if (!kind) {
    parser.emitError(loc, "unknown rope scaling kind '")
        << kindName << "', expected none, linear or llama3";
    return {};
  }
  ArrayRef<StringLiteral> allowed = fieldsOf(*kind);
  ScalingFields fields;
  llvm::StringSet<> seen;
  while (succeeded(parser.parseOptionalComma())) {
    SMLoc fieldLoc = parser.getCurrentLocation();
    StringRef field;
    if (parser.parseKeyword(&field))
      return {};
    if (!llvm::is_contained(allowed, field)) {
      parser.emitError(fieldLoc, "rope scaling '")
          << kindName << "' has no field '" << field << "'";
      return {};
    }
    if (!seen.insert(field).second) {
      parser.emitError(fieldLoc, "rope scaling field '") << field << "' given twice";
      return {};
    }
    if (parser.parseEqual() || parseField(parser, field, fields))
      return {};
  }
  if (parser.parseGreater())
    return {};
  for (StringRef field : allowed) {
    if (!seen.contains(field)) {
      parser.emitError(loc, "rope scaling '") << kindName << "' needs field '" << field << "'";
      return {};
    }
  }
  return parser.getChecked<RopeScalingAttr>(loc, parser.getContext(), *kind, APFloat(fields.factor),
                                            APFloat(fields.lowFreqFactor),
                                            APFloat(fields.highFreqFactor), fields.originalMax);
}

void RopeScalingAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyRopeScalingKind(getKind());
  for (StringRef field : fieldsOf(getKind())) {
    printer << ", " << field << " = ";
    if (field == kFactor)
      printer.printFloat(getFactor());
    else if (field == kLowFreqFactor)
      printer.printFloat(getLowFreqFactor());
    else if (field == kHighFreqFactor)
      printer.printFloat(getHighFreqFactor());
    else
      printer << getOriginalMaxPositionEmbeddings();
  }
  printer << '>';
}

LogicalResult RopeScalingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                      RopeScalingKind kind, APFloat factor, APFloat lowFreqFactor,
                                      APFloat highFreqFactor,
                                      int64_t originalMaxPositionEmbeddings) {
  if (kind == RopeScalingKind::None)
    return success();
  StringRef name = stringifyRopeScalingKind(kind);
  if (!(factor.convertToDouble() > 0))
    return emitError() << "rope scaling '" << name << "' needs factor > 0, got "
                       << factor.convertToDouble();
  if (kind == RopeScalingKind::Linear)
    return success();
  double low = lowFreqFactor.convertToDouble(), high = highFreqFactor.convertToDouble();
  // Llama 3 interpolates between the two wavelength bounds and divides by
  // (high - low), so they must be ordered and distinct.
  if (!(low > 0) || !(high > low))
    return emitError() << "rope scaling 'llama3' needs 0 < low_freq_factor < high_freq_factor, got "
                       << low << " and " << high;
  if (originalMaxPositionEmbeddings <= 0)
    return emitError() << "rope scaling 'llama3' needs original_max_position_embeddings > 0, got "
                       << originalMaxPositionEmbeddings;
  return success();
}

} // namespace llmc::llm
