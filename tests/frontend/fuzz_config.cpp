// Fuzzes config.json parsing: parseJson + parseHfConfig, then the expected
// tensor list of whatever parses. Invariants: an error always names the file;
// a parsed config is consistent (the checks the graph builders rely on).
#include "frontend/model_spec.h"
#include "models/architecture.h"

#include <cstdint>
#include <string_view>

namespace {

void require(bool condition) {
  if (!condition)
    __builtin_trap();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  auto json = llmc::parseJson(text, "config.json");
  if (!json.isOk())
    return 0;
  auto config = llmc::parseHfConfig(*json, "config.json");
  if (!config.isOk()) {
    require(config.message().rfind("config.json: ", 0) == 0);
    return 0;
  }
  const llmc::ModelConfig &c = *config;
  require(c.hiddenSize > 0 && c.numLayers > 0 && c.headDim > 0 && c.headDim % 2 == 0);
  require(c.numKvHeads > 0 && c.numHeads % c.numKvHeads == 0);
  require(c.rmsNormEps > 0 && c.ropeTheta > 0);
  const llmc::Architecture *arch = llmc::findArchitecture(c.architecture);
  require(arch != nullptr);
  for (const llmc::TensorSpec &spec : arch->expectedTensors(c))
    for (int64_t dim : spec.shape)
      require(dim > 0);
  return 0;
}
