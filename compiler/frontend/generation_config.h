// What a model folder says about generating text, beside config.json:
//   tokenizer_config.json   chat_template (a string, or a list of
//                           {"name", "template"}), bos/eos/pad/unk_token (a
//                           string, or an AddedToken object with "content");
//   chat_template.jinja     the newer layout's template (wins over the JSON's
//                           default, as in transformers);
//   generation_config.json  eos_token_id (an id or a list), and the sampling
//                           defaults temperature, top_p, top_k, min_p,
//                           repetition_penalty, max_new_tokens.
// Every file is optional; a present one is validated fully (types, ranges,
// UTF-8, sizes) and an error names the file, the field and the value.
#pragma once

#include "support/status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace llmc {

namespace fb {
struct PlanT;
}

constexpr size_t kMaxChatTemplateBytes = size_t(1) << 20;
constexpr size_t kMaxChatTemplates = 64;
constexpr size_t kMaxSpecialTokenBytes = 1024;

struct GenerationSettings {
  // (name, Jinja source); "default" first when present.
  std::vector<std::pair<std::string, std::string>> chatTemplates;
  std::string bosToken, eosToken, padToken, unkToken; // "" when absent
  std::vector<int64_t> eosTokenIds;                   // generation_config.json's
  std::optional<float> temperature, topP, minP, repetitionPenalty;
  std::optional<int32_t> topK;
  std::optional<int64_t> maxNewTokens;
};

// Reads tokenizer_config.json and chat_template.jinja from `tokenizerDir`
// and generation_config.json from `configDir`. Token ids must be below
// `vocabSize`.
Expected<GenerationSettings> loadGenerationSettings(const std::string &tokenizerDir,
                                                    const std::string &configDir,
                                                    int64_t vocabSize);

// `ids` followed by each of `more` not already in it.
std::vector<int64_t> joinTokenIds(std::vector<int64_t> ids, const std::vector<int64_t> &more);

// Stores the settings in the plan's metadata (TokenizerInfo's templates and
// token strings, Plan.generation). meta.tokenizer must be set.
void recordGenerationSettings(const GenerationSettings &settings, fb::PlanT &meta);

} // namespace llmc
