#include "models/architecture.h"

#include "models/gemma.h"
#include "models/gemma2.h"
#include "models/llama.h"

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
      &qwen3ForCausalLM(),
      &olmo2ForCausalLM(),
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
