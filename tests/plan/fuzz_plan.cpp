// libFuzzer target: the plan loader's validation of a whole file image. The
// metadata checksum is skipped so that mutations reach the structural checks.
#include "plan/plan.h"

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llmc::PlanLoadOptions options;
  options.verifyMetadataChecksum = false;
  options.verifyWeights = false;
  const llmc::fb::Plan *meta = nullptr;
  llmc::Status status = llmc::validatePlanImage(data, size, "fuzz.plan", options, &meta);
  if (!status.isOk() && status.message().rfind("fuzz.plan: ", 0) != 0)
    std::abort(); // every error must name the file
  return 0;
}
