//===- LlmAttrs.cpp - llm dialect attributes ------------------------------===//

#include "ir/LlmAttrs.h"

#include "ir/LlmDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

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
constexpr StringLiteral kBetaFast = "beta_fast";
constexpr StringLiteral kBetaSlow = "beta_slow";
constexpr StringLiteral kTruncate = "truncate";
constexpr StringLiteral kAttentionFactor = "attention_factor";
constexpr StringLiteral kShortFactor = "short_factor";
constexpr StringLiteral kLongFactor = "long_factor";

/// The fields a scaling kind uses, in printing order; the others keep their
/// defaults (factors 1, original max 0, betas 32 and 1, truncate, no
/// longrope factors) and are not printed.
ArrayRef<StringLiteral> fieldsOf(RopeScalingKind kind) {
  static constexpr StringLiteral kLinear[] = {kFactor};
  static constexpr StringLiteral kLlama3[] = {kFactor, kLowFreqFactor, kHighFreqFactor,
                                              kOriginalMax};
  static constexpr StringLiteral kDynamic[] = {kFactor, kOriginalMax};
  static constexpr StringLiteral kYarn[] = {kFactor,   kOriginalMax, kBetaFast,
                                            kBetaSlow, kTruncate,    kAttentionFactor};
  static constexpr StringLiteral kLongRope[] = {kFactor, kOriginalMax, kAttentionFactor,
                                                kShortFactor, kLongFactor};
  switch (kind) {
  case RopeScalingKind::None:
    return {};
  case RopeScalingKind::Linear:
    return kLinear;
  case RopeScalingKind::Llama3:
    return kLlama3;
  case RopeScalingKind::Dynamic:
    return kDynamic;
  case RopeScalingKind::Yarn:
    return kYarn;
  case RopeScalingKind::LongRope:
    return kLongRope;
  }
  llvm_unreachable("unknown RopeScalingKind");
}

struct ScalingFields {
  double factor = 1.0, lowFreqFactor = 1.0, highFreqFactor = 1.0;
  int64_t originalMax = 0;
  double betaFast = 32.0, betaSlow = 1.0;
  bool truncate = true;
  double attentionFactor = 1.0;
  SmallVector<float> shortFactor, longFactor;
};

ParseResult parseFloats(AsmParser &parser, SmallVector<float> &out) {
  return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
    double value;
    if (parser.parseFloat(value))
      return failure();
    out.push_back(static_cast<float>(value));
    return success();
  });
}

ParseResult parseField(AsmParser &parser, StringRef field, ScalingFields &fields) {
  if (field == kFactor)
    return parser.parseFloat(fields.factor);
  if (field == kLowFreqFactor)
    return parser.parseFloat(fields.lowFreqFactor);
  if (field == kHighFreqFactor)
    return parser.parseFloat(fields.highFreqFactor);
  if (field == kBetaFast)
    return parser.parseFloat(fields.betaFast);
  if (field == kBetaSlow)
    return parser.parseFloat(fields.betaSlow);
  if (field == kAttentionFactor)
    return parser.parseFloat(fields.attentionFactor);
  if (field == kShortFactor)
    return parseFloats(parser, fields.shortFactor);
  if (field == kLongFactor)
    return parseFloats(parser, fields.longFactor);
  if (field == kTruncate) {
    if (succeeded(parser.parseOptionalKeyword("true")))
      fields.truncate = true;
    else if (succeeded(parser.parseOptionalKeyword("false")))
      fields.truncate = false;
    else
      return parser.emitError(parser.getCurrentLocation(), "expected true or false");
    return success();
  }
  return parser.parseInteger(fields.originalMax);
}

void printFloats(AsmPrinter &printer, ArrayRef<float> values) {
  printer << '[';
  llvm::interleaveComma(values, printer, [&](float v) { printer.printFloat(APFloat(v)); });
  printer << ']';
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
        << kindName << "', expected none, linear, llama3, dynamic, yarn or longrope";
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
  return parser.getChecked<RopeScalingAttr>(
      loc, parser.getContext(), *kind, APFloat(fields.factor), APFloat(fields.lowFreqFactor),
      APFloat(fields.highFreqFactor), fields.originalMax, APFloat(fields.betaFast),
      APFloat(fields.betaSlow), fields.truncate, APFloat(fields.attentionFactor),
      DenseF32ArrayAttr::get(parser.getContext(), fields.shortFactor),
      DenseF32ArrayAttr::get(parser.getContext(), fields.longFactor));
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
    else if (field == kBetaFast)
      printer.printFloat(getBetaFast());
    else if (field == kBetaSlow)
      printer.printFloat(getBetaSlow());
    else if (field == kAttentionFactor)
      printer.printFloat(getAttentionFactor());
    else if (field == kTruncate)
      printer << (getTruncate() ? "true" : "false");
    else if (field == kShortFactor)
      printFloats(printer, getShortFactor().asArrayRef());
    else if (field == kLongFactor)
      printFloats(printer, getLongFactor().asArrayRef());
    else
      printer << getOriginalMaxPositionEmbeddings();
  }
  printer << '>';
}

namespace {

LogicalResult verifyLongRopeFactors(function_ref<InFlightDiagnostic()> emitError,
                                    ArrayRef<float> shortFactor, ArrayRef<float> longFactor) {
  if (shortFactor.empty() || shortFactor.size() != longFactor.size())
    return emitError() << "rope scaling 'longrope' needs short_factor and long_factor of one "
                          "non-zero length, got "
                       << shortFactor.size() << " and " << longFactor.size();
  for (float f : llvm::concat<const float>(shortFactor, longFactor))
    if (!(f > 0) || !std::isfinite(f))
      return emitError() << "rope scaling 'longrope' needs factors > 0, got " << f;
  return success();
}

} // namespace

LogicalResult RopeScalingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                      RopeScalingKind kind, APFloat factor, APFloat lowFreqFactor,
                                      APFloat highFreqFactor,
                                      int64_t originalMaxPositionEmbeddings, APFloat betaFast,
                                      APFloat betaSlow, bool truncate, APFloat attentionFactor,
                                      DenseF32ArrayAttr shortFactor, DenseF32ArrayAttr longFactor) {
  if (kind == RopeScalingKind::None)
    return success();
  StringRef name = stringifyRopeScalingKind(kind);
  if (!(factor.convertToDouble() > 0))
    return emitError() << "rope scaling '" << name << "' needs factor > 0, got "
                       << factor.convertToDouble();
  if (kind == RopeScalingKind::Linear)
    return success();
  if (originalMaxPositionEmbeddings <= 0)
    return emitError() << "rope scaling '" << name
                       << "' needs original_max_position_embeddings > 0, got "
                       << originalMaxPositionEmbeddings;
  if (kind == RopeScalingKind::Yarn || kind == RopeScalingKind::LongRope) {
    if (!(attentionFactor.convertToDouble() > 0))
      return emitError() << "rope scaling '" << name << "' needs attention_factor > 0, got "
                         << attentionFactor.convertToDouble();
  }
  if (kind == RopeScalingKind::Yarn && !(betaFast.convertToDouble() > 0 &&
                                         betaSlow.convertToDouble() > 0))
    return emitError() << "rope scaling 'yarn' needs beta_fast > 0 and beta_slow > 0, got "
                       << betaFast.convertToDouble() << " and " << betaSlow.convertToDouble();
  if (kind == RopeScalingKind::LongRope)
    return verifyLongRopeFactors(emitError, shortFactor.asArrayRef(), longFactor.asArrayRef());
  if (kind != RopeScalingKind::Llama3)
    return success();
  double low = lowFreqFactor.convertToDouble(), high = highFreqFactor.convertToDouble();
  // Llama 3 interpolates between the two wavelength bounds and divides by
  // (high - low), so they must be ordered and distinct.
  if (!(low > 0) || !(high > low))
    return emitError() << "rope scaling 'llama3' needs 0 < low_freq_factor < high_freq_factor, got "
                       << low << " and " << high;
  return success();
}

} // namespace llmc::llm
