#include "models/unsupported_features.h"

#include <optional>
#include <string_view>

namespace llmc {
namespace {

// A computation a config asks for, as it asks for it.
struct Finding {
  std::string field;   // e.g. "num_local_experts", "attn_config.alibi"
  std::string value;   // as written, e.g. "8"
  std::string feature; // e.g. "mixture-of-experts MLPs"
};

// `key`'s value when it asks for something: present, and not null, false,
// 0 or "" (the spellings configs use for "off").
const Json *asked(const Json &object, const char *key) {
  const Json *field = findField(object, key);
  if (field == nullptr || field->is_null())
    return nullptr;
  if (field->is_boolean() && !field->get<bool>())
    return nullptr;
  if (field->is_number() && field->get<double>() == 0.0)
    return nullptr;
  if (field->is_string() && field->get<std::string>().empty())
    return nullptr;
  return field;
}

struct FieldRule {
  const char *key;
  const char *feature;
};

// Checked in this order; the first field a config sets is the one named.
constexpr FieldRule kFieldRules[] = {
    {"is_encoder_decoder", "an encoder-decoder (a separate encoder, cross-attention in the "
                           "decoder)"},
    {"encoder_layers", "an encoder-decoder (a separate encoder, cross-attention in the decoder)"},
    {"num_decoder_layers", "an encoder-decoder (a separate encoder, cross-attention in the "
                           "decoder)"},
    {"vision_config", "a vision tower (image encoder and projector)"},
    {"vision_tower", "a vision tower (image encoder and projector)"},
    {"mm_vision_tower", "a vision tower (image encoder and projector)"},
    {"visual", "a vision tower (image encoder and projector)"},
    {"audio_config", "an audio tower (speech encoder and projector)"},
    {"speech_config", "an audio tower (speech encoder and projector)"},
    {"kv_lora_rank", "multi-head latent attention (MLA: keys and values through a low-rank "
                     "latent)"},
    {"q_lora_rank", "multi-head latent attention (MLA: queries through a low-rank latent)"},
    {"num_local_experts", "mixture-of-experts MLPs (a router picks experts per token)"},
    {"num_experts", "mixture-of-experts MLPs (a router picks experts per token)"},
    {"n_routed_experts", "mixture-of-experts MLPs (a router picks experts per token)"},
    {"moe_num_experts", "mixture-of-experts MLPs (a router picks experts per token)"},
    {"num_experts_per_tok", "mixture-of-experts MLPs (a router picks experts per token)"},
    {"mamba_d_state", "Mamba state-space layers"},
    {"ssm_state_size", "Mamba state-space layers"},
    {"mamba_expand", "Mamba state-space layers"},
    {"hybrid_override_pattern", "Mamba state-space layers"},
    {"lru_width", "RG-LRU recurrent blocks"},
    {"conv_L_cache", "short-convolution blocks"},
    {"alibi", "ALiBi position biases (instead of RoPE)"},
    {"use_alibi", "ALiBi position biases (instead of RoPE)"},
};

// Mamba's own spelling: `state_size` with a `conv_kernel`.
std::optional<Finding> findMambaStateSize(const Json &hf) {
  const Json *state = asked(hf, "state_size");
  if (state == nullptr || asked(hf, "conv_kernel") == nullptr)
    return std::nullopt;
  return Finding{"state_size", state->dump(), "Mamba state-space layers"};
}

// Nested spellings: MPT's attn_config.alibi, DBRX's ffn_config.moe_num_experts,
// a position_embedding_type of "alibi".
std::optional<Finding> findNested(const Json &hf) {
  if (const Json *attn = findField(hf, "attn_config"); attn && attn->is_object())
    if (const Json *alibi = asked(*attn, "alibi"))
      return Finding{"attn_config.alibi", alibi->dump(), "ALiBi position biases (instead of RoPE)"};
  if (const Json *ffn = findField(hf, "ffn_config"); ffn && ffn->is_object())
    if (const Json *experts = asked(*ffn, "moe_num_experts"))
      return Finding{"ffn_config.moe_num_experts", experts->dump(),
                     "mixture-of-experts MLPs (a router picks experts per token)"};
  for (const char *key : {"position_embedding_type", "positional_encoding_type"})
    if (const Json *type = findField(hf, key); type && type->is_string() && *type == "alibi")
      return Finding{key, type->dump(), "ALiBi position biases (instead of RoPE)"};
  return std::nullopt;
}

std::optional<Finding> findUnsupportedFeature(const Json &hf) {
  if (!hf.is_object())
    return std::nullopt;
  for (const FieldRule &rule : kFieldRules)
    if (const Json *value = asked(hf, rule.key))
      return Finding{rule.key, value->dump(), rule.feature};
  if (auto mamba = findMambaStateSize(hf))
    return mamba;
  return findNested(hf);
}

// Classes llmc recognises but does not build, with what each needs.
struct KnownClass {
  std::string_view name;
  const char *needs;
};

constexpr const char *kMoe = "mixture-of-experts MLPs (a router picks experts per token)";
constexpr const char *kMla = "multi-head latent attention (MLA: keys and values through a "
                             "low-rank latent) and mixture-of-experts MLPs";
constexpr const char *kMamba = "Mamba state-space layers";
constexpr const char *kAlibi = "ALiBi position biases (instead of RoPE)";
constexpr const char *kVision = "a vision tower (image encoder and projector)";
constexpr const char *kEncoderDecoder =
    "an encoder-decoder (a separate encoder, cross-attention in the decoder)";

constexpr KnownClass kKnownClasses[] = {
    {"MixtralForCausalLM", kMoe},
    {"Qwen2MoeForCausalLM", kMoe},
    {"Qwen3MoeForCausalLM", kMoe},
    {"OlmoeForCausalLM", kMoe},
    {"GraniteMoeForCausalLM", kMoe},
    {"GraniteMoeSharedForCausalLM", kMoe},
    {"PhimoeForCausalLM", kMoe},
    {"DbrxForCausalLM", kMoe},
    {"JetMoeForCausalLM", kMoe},
    {"ArcticForCausalLM", kMoe},
    {"ExaoneMoeForCausalLM", kMoe},
    {"DeepseekV2ForCausalLM", kMla},
    {"DeepseekV3ForCausalLM", kMla},
    {"JambaForCausalLM", "Mamba state-space layers between its attention layers, and "
                         "mixture-of-experts MLPs"},
    {"FalconH1ForCausalLM", "Mamba-2 state-space mixers beside attention in every layer"},
    {"FalconMambaForCausalLM", kMamba},
    {"MambaForCausalLM", kMamba},
    {"Mamba2ForCausalLM", kMamba},
    {"ZambaForCausalLM", kMamba},
    {"Zamba2ForCausalLM", kMamba},
    {"BambaForCausalLM", kMamba},
    {"NemotronHForCausalLM", kMamba},
    {"GraniteMoeHybridForCausalLM", "Mamba-2 state-space layers and mixture-of-experts MLPs"},
    {"RecurrentGemmaForCausalLM", "RG-LRU recurrent blocks"},
    {"RwkvForCausalLM", "RWKV time mixing (a recurrence instead of attention)"},
    {"BloomForCausalLM", kAlibi},
    {"MptForCausalLM", kAlibi},
    {"Gemma3ForConditionalGeneration",
     "a SigLIP vision tower and its projector (vision_config); its text model alone is "
     "Gemma3ForCausalLM, which llmc builds"},
    {"LlavaForConditionalGeneration", kVision},
    {"LlavaNextForConditionalGeneration", kVision},
    {"MllamaForConditionalGeneration", "a vision tower and cross-attention layers"},
    {"PaliGemmaForConditionalGeneration", kVision},
    {"Qwen2VLForConditionalGeneration", "a vision tower and multimodal RoPE (M-RoPE)"},
    {"Qwen2_5_VLForConditionalGeneration", "a vision tower and multimodal RoPE (M-RoPE)"},
    {"Qwen2AudioForConditionalGeneration", "an audio tower (speech encoder and projector)"},
    {"T5ForConditionalGeneration", kEncoderDecoder},
    {"MT5ForConditionalGeneration", kEncoderDecoder},
    {"BartForConditionalGeneration", kEncoderDecoder},
    {"WhisperForConditionalGeneration", "an audio encoder-decoder"},
};

template <size_t N> const KnownClass *findIn(const KnownClass (&table)[N], std::string_view name) {
  for (const KnownClass &known : table)
    if (known.name == name)
      return &known;
  return nullptr;
}

} // namespace

Status checkUnsupportedFeatures(const Json &hf, const std::string &className,
                                const std::string &source) {
  std::optional<Finding> finding = findUnsupportedFeature(hf);
  if (!finding)
    return Status::ok();
  return Status::error(source + ": field '" + finding->field + "': " + finding->value +
                       " asks for " + finding->feature + ", which llmc does not implement; " +
                       "the rest of " + className + " is supported");
}

Status explainUnsupportedClass(const Json &hf, const std::string &className,
                               const std::string &source, const std::string &supportedList) {
  const KnownClass *known = findIn(kKnownClasses, className);
  std::string needs;
  if (known != nullptr) {
    needs = known->needs;
  } else if (className == "FalconForCausalLM") {
    // Falcon has both: ALiBi when `alibi` is true, RoPE otherwise.
    const Json *alibi = asked(hf, "alibi");
    needs = alibi ? std::string(kAlibi) + " (field 'alibi': true)"
                  : "Falcon's block (attention and MLP in parallel from one LayerNorm, "
                    "multi-query attention, a packed query_key_value)";
  } else {
    std::optional<Finding> finding = findUnsupportedFeature(hf);
    if (!finding)
      return Status::ok();
    return Status::error(source + ": architectures[0] '" + className + "' is not supported: " +
                         "field '" + finding->field + "': " + finding->value + " asks for " +
                         finding->feature + ", which llmc does not implement; " + supportedList);
  }
  std::string detail;
  if (std::optional<Finding> finding = findUnsupportedFeature(hf))
    detail = " (field '" + finding->field + "': " + finding->value + ")";
  return Status::error(source + ": architectures[0] '" + className + "' is recognised, but it " +
                       "needs " + needs + detail + ", which llmc does not implement; " +
                       supportedList);
}

} // namespace llmc
