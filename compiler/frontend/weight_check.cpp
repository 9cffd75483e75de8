#include "frontend/weight_check.h"

#include "models/architecture.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <set>

namespace llmc {
namespace {

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool isFloat(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// The checkpoint as named in messages: its file, or its first file and a count.
std::string checkpointName(const WeightSet &weights) {
  const auto &files = weights.files();
  if (files.empty())
    return "checkpoint";
  if (files.size() == 1)
    return files[0].path();
  return files[0].path() + " and " + std::to_string(files.size() - 1) + " more files";
}

// "" when `found` matches `spec`, else what is wrong with it.
std::string mismatch(const TensorSpec &spec, const TensorView *found,
                     const std::string &configSource) {
  if (found == nullptr)
    return "missing " + spec.name;
  if (found->shape != spec.shape)
    return spec.name + " has shape " + shapeString(found->shape) + " but " + configSource +
           " needs " + shapeString(spec.shape);
  if (!isFloat(found->dtype))
    return spec.name + " has dtype " + std::string(dtypeName(found->dtype)) +
           " but must be F32, F16 or BF16";
  return "";
}

// When nothing expected is present the names are probably another family's.
std::string noneFoundHint(const WeightSet &weights, size_t expected) {
  std::string hint = "; none of the " + std::to_string(expected) +
                     " expected tensors is present (is this checkpoint for another "
                     "architecture?); it holds e.g.";
  size_t shown = 0;
  for (const auto &entry : weights.all()) {
    if (shown++ == 3)
      break;
    hint += " '" + entry.first + "'";
  }
  return hint;
}

void warnUnused(const Architecture &arch, const ModelConfig &config, const WeightSet &weights,
                const std::set<std::string> &used, std::vector<std::string> &warnings) {
  size_t unused = 0;
  for (const auto &[name, view] : weights.all()) {
    if (used.count(name))
      continue;
    if (++unused > kMaxListedUnusedTensors)
      continue;
    std::string why = arch.explainUnusedTensor(config, name);
    warnings.push_back(view.file + ": tensor '" + name + "' is not used by " +
                       std::string(arch.name()) + (why.empty() ? "" : ": " + why));
  }
  if (unused > kMaxListedUnusedTensors)
    warnings.push_back(checkpointName(weights) + ": " +
                       std::to_string(unused - kMaxListedUnusedTensors) +
                       " more tensors are not used by " + std::string(arch.name()));
}

} // namespace

Status checkWeights(const ModelConfig &config, const WeightSet &weights,
                    std::vector<std::string> *warnings, const std::string &configSource) {
  const Architecture *arch = findArchitecture(config.architecture);
  if (arch == nullptr)
    return Status::error(configSource + ": architecture '" + config.architecture +
                         "' is not supported; supported: " + supportedArchitectureList());
  const std::vector<TensorSpec> expected = arch->expectedTensors(config);
  std::vector<std::string> problems;
  std::set<std::string> used;
  size_t missing = 0;
  for (const TensorSpec &spec : expected) {
    const TensorView *found = weights.find(spec.name);
    used.insert(spec.name);
    missing += found == nullptr;
    std::string problem = mismatch(spec, found, configSource);
    if (!problem.empty())
      problems.push_back(std::move(problem));
  }
  if (warnings != nullptr)
    warnUnused(*arch, config, weights, used, *warnings);
  if (problems.empty())
    return Status::ok();
  std::string message = checkpointName(weights) + ": " + std::to_string(problems.size()) +
                        (problems.size() == 1 ? " tensor does" : " tensors do") + " not match " +
                        configSource + ": ";
  for (size_t i = 0; i < problems.size() && i < kMaxListedWeightProblems; ++i)
    message += (i ? "; " : "") + problems[i];
  if (problems.size() > kMaxListedWeightProblems)
    message += "; ... and " + std::to_string(problems.size() - kMaxListedWeightProblems) + " more";
  if (missing == expected.size() && !weights.all().empty())
    message += noneFoundHint(weights, expected.size());
  return Status::error(message);
}

uint64_t countNonFinite(const TensorView &tensor) {
  // A value is NaN or infinite when all its exponent bits are set.
  auto count = [&](auto word, auto exponentMask) {
    using Word = decltype(word);
    const uint64_t n = tensor.byteSize / sizeof(Word);
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; ++i) {
      Word w;
      std::memcpy(&w, tensor.data + i * sizeof(Word), sizeof(Word));
      bad += (w & exponentMask) == exponentMask;
    }
    return bad;
  };
  switch (tensor.dtype) {
  case DType::F32:
    return count(uint32_t(0), uint32_t(0x7f800000u));
  case DType::F16:
    return count(uint16_t(0), uint16_t(0x7c00u));
  case DType::BF16:
    return count(uint16_t(0), uint16_t(0x7f80u));
  default:
    return 0;
  }
}

// Hands the whole pages of a tensor that lies in one of the checkpoint's
// read-only file mappings back to the OS (read again from the file when
// next touched): the check reads every weight once, and a build that
// calibrates or quantizes layer by layer should not keep them all resident.
void releaseMappedPages(const WeightSet &weights, const TensorView &t) {
  for (const SafetensorsFile &file : weights.files()) {
    const uint8_t *begin = file.mapping().data();
    if (t.data < begin || t.data + t.byteSize > begin + file.mapping().size())
      continue;
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t first = (reinterpret_cast<uintptr_t>(t.data) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(t.data) + t.byteSize) / page * page;
    if (end > first)
      madvise(reinterpret_cast<void *>(first), end - first, MADV_DONTNEED);
    return;
  }
}

std::vector<std::string> findNonFiniteWeights(const ModelConfig &config, const WeightSet &weights) {
  std::vector<std::string> found;
  const Architecture *arch = findArchitecture(config.architecture);
  if (arch == nullptr)
    return found; // checkWeights has refused it
  for (const TensorSpec &spec : arch->expectedTensors(config)) {
    const TensorView *t = weights.find(spec.name);
    if (t == nullptr || t->data == nullptr)
      continue;
    if (uint64_t bad = countNonFinite(*t))
      found.push_back(t->file + ": tensor '" + spec.name + "' holds " + std::to_string(bad) +
                      " NaN/Inf values (of " + std::to_string(t->byteSize / dtypeSize(t->dtype)) +
                      ")");
    releaseMappedPages(weights, *t);
  }
  return found;
}

Expected<WeightSet> openModelWeights(const ModelSpec &spec) {
  if (!spec.weightIndex.empty())
    return WeightSet::openIndex(spec.weightIndex);
  return WeightSet::openFiles(spec.weightFiles);
}

} // namespace llmc
