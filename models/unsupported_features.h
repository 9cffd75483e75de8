// Refusals that name what is missing, not only the class. Two questions:
//   - a config of any class asks for a computation no llmc family runs
//     (mixture-of-experts MLPs, multi-head latent attention, a vision or
//     audio tower, an encoder-decoder, state-space layers, ALiBi): the
//     error names the field and the feature;
//   - an architectures[0] llmc does not register but recognises (Mixtral,
//     DeepSeek-V3, Bloom, Jamba, Gemma3ForConditionalGeneration, EXAONE 3,
//     InternLM2, ...): the error names what that class needs that llmc lacks.
// Both are read before the family's own rules, so that a Mixtral checkpoint
// is refused for its experts rather than for a missing mlp.gate_proj.
#pragma once

#include "support/json.h"
#include "support/status.h"

#include <string>

namespace llmc {

// For a class llmc registers (`className`): an error naming the first field
// of `hf` that asks for a feature llmc does not implement, and saying that
// the rest of the class is supported; ok() when there is none.
Status checkUnsupportedFeatures(const Json &hf, const std::string &className,
                                const std::string &source);

// For a class llmc does not register: an error naming what the class needs
// that llmc lacks, when llmc recognises it; ok() when it does not (the caller
// then gives its plain "not supported" message). `supportedList` ends it.
Status explainUnsupportedClass(const Json &hf, const std::string &className,
                               const std::string &source, const std::string &supportedList);

} // namespace llmc
