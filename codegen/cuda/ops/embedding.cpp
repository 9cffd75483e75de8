// Embedding: out[t] = table[tokens[t]] (times Gemma's scale), one block per row.
#include "cuda/ops/ops.h"

#include <algorithm>

namespace llmc::cuda::ops {

Expected<KernelInstance> embeddingKernel(const StepView &v) {
  DType w = v.weightDType(0), a = v.dtype(v.output());
  int64_t vocab = v.weight(0).shape.at(0), hidden = v.weight(0).shape.at(1);
  int threads = static_cast<int>(std::clamp<int64_t>(roundUp(hidden, 32), 32, 256));
  const float scale = static_cast<float>(v.step.params.AsEmbeddingParams()->scale);
  KernelInstance k;
  k.name = "llmc_embedding_" + std::string(tag(a)) + "_w" + tag(w) + "_v" + str(vocab) + "_h" +
           str(hidden) + (scale != 1.0f ? "_x" + floatTag(scale) : "");
  k.source =
      translationUnit(k.name, "Embedding table[" + str(vocab) + ", " + str(hidden) + "]",
                      "elementwise.cuh", "", threads, "StepArgs",
                      "llmc::dev::embedding<" + std::string(deviceType(w)) + ", " + deviceType(a) +
                          ", " + str(hidden) + ", " + str(vocab) + ", " + str(threads) + ">(args" +
                          (scale != 1.0f ? ", " + floatLiteral(scale) : "") + ")");
  perRowGrid(k.launch, threads);
  return k;
}

} // namespace llmc::cuda::ops
