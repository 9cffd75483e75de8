// Refusals that name the missing feature (models/unsupported_features.h):
// one config per kind, each a trimmed copy of what the class's checkpoints
// publish. A recognised class says so and names what it needs; a supported
// class whose config asks for more names the field and says the rest is
// supported.
#include "frontend/model_spec.h"
#include "frontend_test_util.h"

namespace llmc {
namespace {

std::string refusal(const std::string &json) {
  auto config = parseHfConfig(Json::parse(json), "config.json");
  EXPECT_FALSE(config.isOk()) << "expected a refusal of " << json;
  if (config.isOk())
    return "";
  EXPECT_EQ(config.message().rfind("config.json: ", 0), 0u) << config.message();
  return config.message();
}

void expectHas(const std::string &message, const std::vector<std::string> &parts) {
  for (const std::string &part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

// The sizes every refused config shares; `extra` is spliced in.
std::string config(const std::string &architecture, const std::string &extra) {
  return R"({"architectures": [")" + architecture + R"("], "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "max_position_embeddings": 256, "vocab_size": 512)" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

TEST(UnsupportedFeature, MoeClassesNameTheirExperts) {
  expectHas(
      refusal(config("MixtralForCausalLM", R"("num_local_experts": 8, "num_experts_per_tok": 2)")),
      {"'MixtralForCausalLM' is recognised", "mixture-of-experts", "'num_local_experts': 8",
       "supported: LlamaForCausalLM"});
  for (const char *cls : {"Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "OlmoeForCausalLM",
                          "GraniteMoeForCausalLM", "PhimoeForCausalLM"})
    expectHas(refusal(config(cls, "")),
              {std::string("'") + cls + "' is recognised", "mixture-of-experts"});
}

TEST(UnsupportedFeature, ExpertFieldsOnAnySupportedClass) {
  for (const char *field : {"num_experts", "num_local_experts", "n_routed_experts"})
    expectHas(refusal(config("Qwen2ForCausalLM", std::string("\"") + field + "\": 4")),
              {std::string("field '") + field + "': 4", "mixture-of-experts",
               "the rest of Qwen2ForCausalLM is supported"});
  expectHas(refusal(config("LlamaForCausalLM", R"("ffn_config": {"moe_num_experts": 16})")),
            {"'ffn_config.moe_num_experts': 16", "mixture-of-experts"});
  // Off spellings ask for nothing.
  auto dense = parseHfConfig(Json::parse(config("LlamaForCausalLM", R"("num_experts": 0,
                                                 "num_local_experts": null, "alibi": false)")),
                             "config.json");
  EXPECT_TRUE(dense.isOk()) << dense.message();
}

TEST(UnsupportedFeature, MlaNamesTheLatentRank) {
  expectHas(refusal(config("DeepseekV3ForCausalLM",
                           R"("kv_lora_rank": 512, "q_lora_rank": 1536, "n_routed_experts": 256)")),
            {"'DeepseekV3ForCausalLM' is recognised", "multi-head latent attention",
             "mixture-of-experts", "'kv_lora_rank': 512"});
  expectHas(refusal(config("LlamaForCausalLM", R"("kv_lora_rank": 512)")),
            {"'kv_lora_rank': 512", "multi-head latent attention", "rest of LlamaForCausalLM"});
}

TEST(UnsupportedFeature, VisionAndAudioTowers) {
  expectHas(refusal(R"({"architectures": ["Gemma3ForConditionalGeneration"],
                        "model_type": "gemma3", "text_config": {"hidden_size": 2560},
                        "vision_config": {"model_type": "siglip_vision_model"}})"),
            {"'Gemma3ForConditionalGeneration' is recognised", "vision tower",
             "Gemma3ForCausalLM, which llmc builds", "'vision_config'"});
  expectHas(refusal(config("LlavaForConditionalGeneration", R"("vision_config": {})")),
            {"recognised", "vision tower"});
  expectHas(refusal(config("Qwen2AudioForConditionalGeneration", "")), {"audio tower"});
  expectHas(refusal(config("SomeNewOmniModel", R"("audio_config": {"d_model": 8})")),
            {"'SomeNewOmniModel' is not supported", "'audio_config'", "audio tower"});
  expectHas(refusal(config("Qwen2ForCausalLM", R"("vision_config": {"depth": 2})")),
            {"'vision_config'", "vision tower", "rest of Qwen2ForCausalLM"});
}

TEST(UnsupportedFeature, EncoderDecoder) {
  expectHas(refusal(config("T5ForConditionalGeneration", R"("is_encoder_decoder": true)")),
            {"'T5ForConditionalGeneration' is recognised", "encoder-decoder"});
  expectHas(refusal(config("MyTranslator", R"("is_encoder_decoder": true)")),
            {"'MyTranslator' is not supported", "'is_encoder_decoder': true", "encoder-decoder"});
}

TEST(UnsupportedFeature, StateSpaceHybrids) {
  expectHas(refusal(config("JambaForCausalLM", R"("mamba_d_state": 16, "num_experts": 16)")),
            {"'JambaForCausalLM' is recognised", "Mamba"});
  expectHas(refusal(config("FalconH1ForCausalLM", R"("mamba_d_state": 256)")),
            {"'FalconH1ForCausalLM' is recognised", "Mamba-2"});
  expectHas(refusal(config("MambaForCausalLM", R"("state_size": 16, "conv_kernel": 4)")),
            {"recognised", "state-space", "'state_size': 16"});
  expectHas(refusal(config("LlamaForCausalLM", R"("ssm_state_size": 128)")),
            {"'ssm_state_size': 128", "state-space", "rest of LlamaForCausalLM"});
}

TEST(UnsupportedFeature, Alibi) {
  expectHas(refusal(config("BloomForCausalLM", "")), {"'BloomForCausalLM' is recognised", "ALiBi"});
  expectHas(refusal(config("MptForCausalLM", R"("attn_config": {"alibi": true})")),
            {"'MptForCausalLM' is recognised", "ALiBi", "'attn_config.alibi': true"});
  expectHas(refusal(config("FalconForCausalLM", R"("alibi": true)")),
            {"'FalconForCausalLM' is recognised", "ALiBi", "'alibi': true"});
  // Falcon without ALiBi is refused for its block, not for ALiBi.
  std::string rotary = refusal(config("FalconForCausalLM", R"("alibi": false)"));
  expectHas(rotary, {"'FalconForCausalLM' is recognised", "parallel"});
  EXPECT_EQ(rotary.find("ALiBi"), std::string::npos) << rotary;
  expectHas(refusal(config("MistralForCausalLM", R"("position_embedding_type": "alibi")")),
            {"'position_embedding_type'", "ALiBi", "rest of MistralForCausalLM"});
}

TEST(UnsupportedFeature, UnknownClassWithoutFeaturesKeepsThePlainMessage) {
  std::string message = refusal(config("GPT2LMHeadModel", ""));
  EXPECT_EQ(message.rfind("config.json: architectures[0] 'GPT2LMHeadModel' is not supported; "
                          "supported: LlamaForCausalLM",
                          0),
            0u)
      << message;
}

} // namespace
} // namespace llmc
