#include "frontend/derived_tensors.h"

#include "models/architecture.h"

#include <cstring>

namespace llmc {
namespace {

// Bytes of one row: the product of every dimension but the first, times the
// element size (a vector's row is one element).
uint64_t rowBytes(const TensorView &t) {
  uint64_t elements = 1;
  for (size_t i = 1; i < t.shape.size(); ++i)
    elements *= static_cast<uint64_t>(t.shape[i]);
  return elements * dtypeSize(t.dtype);
}

// A derived tensor that is one source tensor whole, of the same shape, is a
// second name of the source's bytes: no copy (EXAONE 3.x renames every
// tensor of a multi-gigabyte checkpoint).
bool isWholeSource(const DerivedTensor &d, const TensorView *src) {
  return d.pieces.size() == 1 && src != nullptr && d.pieces[0].begin == 0 && src->shape == d.shape;
}

Status addOne(const DerivedTensor &d, WeightSet &weights) {
  if (!d.pieces.empty()) {
    const TensorView *src = weights.find(d.pieces[0].source);
    if (isWholeSource(d, src)) {
      TensorView view = *src;
      view.name = d.name;
      return weights.addAlias(std::move(view));
    }
  }
  std::vector<uint8_t> bytes;
  const TensorView *first = nullptr;
  for (const DerivedTensor::Piece &piece : d.pieces) {
    const TensorView *src = weights.find(piece.source);
    const std::string where = "derived tensor '" + d.name + "': source '" + piece.source + "'";
    if (src == nullptr || src->shape.empty())
      return Status::error(where + " is not in the checkpoint");
    if (first != nullptr && src->dtype != first->dtype)
      return Status::error(where + " has dtype " + std::string(dtypeName(src->dtype)) +
                           " but an earlier piece has " + std::string(dtypeName(first->dtype)));
    if (piece.begin < 0 || piece.count < 0 || piece.begin + piece.count > src->shape[0])
      return Status::error(where + " has " + std::to_string(src->shape[0]) +
                           " rows; rows [" + std::to_string(piece.begin) + ", " +
                           std::to_string(piece.begin + piece.count) + ") do not fit");
    first = first ? first : src;
    const uint64_t row = rowBytes(*src);
    const uint8_t *begin = src->data + static_cast<uint64_t>(piece.begin) * row;
    bytes.insert(bytes.end(), begin, begin + static_cast<uint64_t>(piece.count) * row);
  }
  if (first == nullptr)
    return Status::error("derived tensor '" + d.name + "' has no pieces");
  uint64_t elements = 1;
  for (int64_t dim : d.shape)
    elements *= static_cast<uint64_t>(dim);
  if (elements * dtypeSize(first->dtype) != bytes.size())
    return Status::error("internal: derived tensor '" + d.name + "' gathers " +
                         std::to_string(bytes.size()) + " bytes but its shape needs " +
                         std::to_string(elements * dtypeSize(first->dtype)));
  TensorView view;
  view.name = d.name;
  view.dtype = first->dtype;
  view.shape = d.shape;
  view.file = first->file;
  return weights.addDerived(std::move(view), std::move(bytes));
}

} // namespace

Status addDerivedTensors(const ModelConfig &config, WeightSet &weights) {
  const Architecture *arch = findArchitecture(config.architecture);
  if (arch == nullptr)
    return Status::error("architecture '" + config.architecture + "' is not supported");
  for (const DerivedTensor &d : arch->derivedTensors(config))
    LLMC_RETURN_IF_ERROR(addOne(d, weights));
  return Status::ok();
}

} // namespace llmc
