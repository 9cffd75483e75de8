#include "models/architecture.h"

#include "models/exaone.h"
#include "models/exaone4.h"
#include "models/gemma.h"
#include "models/gemma2.h"
#include "models/gemma3.h"
#include "models/granite.h"
#include "models/internlm2.h"
#include "models/layer_norm_family.h"
#include "models/llama.h"
#include "models/phi3.h"

#include <set>

namespace llmc {
namespace {

// Registry order is the order of the "supported: ..." list in messages.
const std::vector<const Architecture *> &registry() {
  static const std::vector<const Architecture *> table = {
      &llamaForCausalLM(),
      &mistralForCausalLM(),
      &qwen2ForCausalLM(),
      &gemmaForCausalLM(),
      &gemma2ForCausalLM(),
      &gemma3ForCausalLM(),
      &qwen3ForCausalLM(),
      &olmo2ForCausalLM(),
      &exaone4ForCausalLM(),
      &stableLmForCausalLM(),
      &starcoder2ForCausalLM(),
      &cohereForCausalLM(),
      &phiForCausalLM(),
      &gptNeoXForCausalLM(),
      &graniteForCausalLM(),
      &phi3ForCausalLM(),
      &exaoneForCausalLM(),
      &internLm2ForCausalLM(),
  };
  return table;
}

} // namespace

const Architecture *findArchitecture(std::string_view name) {
  for (const Architecture *arch : registry())
    if (arch->name() == name)
      return arch;
  return nullptr;
}

std::string configKey(const Architecture &arch, const Json &hf, const std::string &canonical) {
  for (const ConfigAlias &alias : arch.configAliases())
    if (canonical == alias.canonical &&
        (findField(hf, alias.published) != nullptr || findField(hf, canonical.c_str()) == nullptr))
      return alias.published;
  return canonical;
}

std::vector<TensorSpec> graphTensors(const Architecture &arch, const ModelConfig &config) {
  std::vector<DerivedTensor> derived = arch.derivedTensors(config);
  std::set<std::string> sources;
  for (const DerivedTensor &d : derived)
    for (const DerivedTensor::Piece &piece : d.pieces)
      sources.insert(piece.source);
  std::vector<TensorSpec> specs;
  for (TensorSpec &spec : arch.expectedTensors(config))
    if (!sources.count(spec.name))
      specs.push_back(std::move(spec));
  for (DerivedTensor &d : derived)
    specs.push_back({std::move(d.name), std::move(d.shape)});
  return specs;
}

std::vector<std::string> supportedArchitectureNames() {
  std::vector<std::string> names;
  for (const Architecture *arch : registry())
    names.emplace_back(arch->name());
  return names;
}

std::string supportedArchitectureList() {
  std::string list;
  for (const std::string &name : supportedArchitectureNames())
    list += (list.empty() ? "" : ", ") + name;
  return list;
}

} // namespace llmc
