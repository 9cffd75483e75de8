// libFuzzer target: a plan image the loader accepts is then run on the CPU
// backend for a few tokens (a prefill of 3 and 2 decode steps, one thread, a
// KV cache of 5 slots), so that what the validator lets through is what the
// kernels can index without faults. Checksums are skipped so that mutations
// reach the structural checks and the kernels; plans that would generate
// more than a few MiB of weights or activations are only validated, to keep
// each exec fast.
#include "plan_run.h"

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llmc::PlanLoadOptions options;
  options.verifyMetadataChecksum = false;
  options.verifyWeights = false;
  auto plan = llmc::Plan::fromImage(data, size, "fuzz.plan", options);
  if (!plan) {
    if (plan.message().rfind("fuzz.plan: ", 0) != 0)
      std::abort(); // every error must name the file
    return 0;
  }
  if (!llmc::test::cheapToRun(*plan))
    return 0;
  // Errors are fine (a step that needs more KV room, say); faults are not.
  (void)llmc::test::runOnCpu(*plan, 3, 2);
  return 0;
}
