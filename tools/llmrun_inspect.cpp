// llmrun inspect engine.plan [--json]: what a plan holds.
#include "cli_common.h"
#include "llmrun_commands.h"
#include "ops/op_table.h"
#include "ops/operands.h"
#include "ops/rope.h"
#include "plan/plan.h"
#include "tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <type_traits>

namespace llmc {
namespace {

// Bytes of activations one step writes per token (its outputs' widths). An
// LmHead step writes its logits only when the runtime asks for them (not in
// greedy decoding): only its ids count.
uint64_t activationBytesPerToken(const fb::Program &program) {
  uint64_t bytes = 0;
  for (const fb::Step *step : *program.steps())
    for (uint32_t i = step->op() == fb::OpKind::LmHead ? 1 : 0; i < step->outputs()->size(); ++i) {
      const fb::Buffer &buffer = *program.buffers()->Get(step->outputs()->Get(i));
      bytes += buffer.width() * dtypeSize(static_cast<DType>(buffer.dtype()));
    }
  return bytes;
}

nlohmann::json describe(const Plan &plan, const Tokenizer &tokenizer) {
  const fb::Plan &meta = plan.meta();
  const fb::ModelInfo &m = *meta.model();
  nlohmann::json j;
  j["model"] = {{"architecture", m.architecture() ? m.architecture()->str() : ""},
                {"hidden_size", m.hidden_size()},
                {"intermediate_size", m.intermediate_size()},
                {"num_layers", m.num_layers()},
                {"num_heads", m.num_heads()},
                {"num_kv_heads", m.num_kv_heads()},
                {"head_dim", m.head_dim()},
                {"vocab_size", m.vocab_size()},
                {"max_seq_len", m.max_seq_len()},
                {"tie_word_embeddings", m.tie_word_embeddings()}};
  // The distinct RoPE configurations of the steps (one for most models).
  nlohmann::json ropes = nlohmann::json::array();
  if (meta.programs()->size() > 0)
    for (const fb::Step *step : *meta.programs()->Get(0)->steps()) {
      const fb::RopeParams *r = ops::stepRope(*step);
      if (r == nullptr)
        continue;
      const fb::RopeScaling *sc = r->scaling();
      nlohmann::json rope = {
          {"theta", r->theta()},
          {"rotary_dim", r->rotary_dim()},
          {"interleaved", r->interleaved()},
          {"scaling", sc ? fb::EnumNameRopeScalingKind(sc->kind()) : "None"}};
      if (sc != nullptr)
        rope["factor"] = sc->factor();
      if (std::find(ropes.begin(), ropes.end(), rope) == ropes.end())
        ropes.push_back(rope);
    }
  j["model"]["rope"] = ropes;
  // Sliding windows per layer (0: global), shown when a layer has one.
  const std::vector<int32_t> windows = attentionWindows(meta);
  if (std::any_of(windows.begin(), windows.end(), [](int32_t w) { return w != 0; }))
    j["model"]["attention_windows"] = windows;
  uint64_t parameters = 0;
  for (const fb::Tensor *t : *meta.tensors())
    parameters += t->size() / dtypeSize(static_cast<DType>(t->dtype()));
  j["weights"] = {{"dtype", fb::EnumNameDType(meta.weight_dtype())},
                  {"tensors", meta.tensors()->size()},
                  {"parameters", parameters},
                  {"synthetic", meta.synthetic()},
                  {"synthetic_seed", meta.synthetic_seed()}};
  j["size"] = {{"file", plan.fileSize()},
               {"metadata", plan.metadataSize()},
               {"weights", plan.weightsSize()},
               {"tokenizer", meta.tokenizer()->tokenizer_json()->size()}};
  j["tokenizer"] = {{"vocab_size", tokenizer.vocabSize()}};
  nlohmann::json programs = nlohmann::json::array();
  for (const fb::Program *p : *meta.programs()) {
    std::map<std::string, int> kernels;
    for (const fb::Step *s : *p->steps())
      ++kernels[ops::stepVariant(*s)];
    programs.push_back({{"target", fb::EnumNameTarget(p->target())},
                        {"phase", fb::EnumNamePhase(p->phase())},
                        {"steps", p->steps()->size()},
                        {"steps_per_layer", static_cast<double>(p->steps()->size()) /
                                                static_cast<double>(m.num_layers())},
                        {"kernels", kernels},
                        {"buffers", p->buffers()->size()},
                        {"arena_bytes_per_token", p->arena_bytes_per_token()},
                        {"activation_bytes_written_per_token", activationBytesPerToken(*p)}});
  }
  j["programs"] = programs;
  // The vocabulary projection of the first program's head step: its storage
  // (Dense, or Q4 / Q8 from `llmc build --quantize-lm-head`) and bytes.
  if (meta.programs()->size() > 0)
    for (const fb::Step *step : *meta.programs()->Get(0)->steps()) {
      const fb::LogitsParams *lp = step->params_as_LogitsParams();
      if (lp == nullptr)
        continue;
      const int first = ops::logitsMatrix(*lp), parts = ops::matrixParts(lp->weights());
      uint64_t bytes = 0;
      std::string dtype;
      for (int i = first; i < first + parts && i < static_cast<int>(step->weights()->size());
           ++i) {
        const fb::Tensor *t = meta.tensors()->Get(step->weights()->Get(i));
        bytes += t->size();
        if (i == first)
          dtype = fb::EnumNameDType(t->dtype());
      }
      j["lm_head"] = {{"weights", fb::EnumNameWeightFormat(lp->weights())},
                      {"group_size", lp->group_size()},
                      {"dtype", dtype},
                      {"bytes", bytes}};
      break;
    }
  nlohmann::json modules = nlohmann::json::array();
  if (meta.modules())
    for (const fb::KernelModule *mod : *meta.modules())
      modules.push_back({{"target", fb::EnumNameTarget(mod->target())},
                         {"bytes", mod->image() ? mod->image()->size() : 0},
                         {"functions", mod->functions() ? mod->functions()->size() : 0}});
  j["modules"] = modules;
  j["kv_cache"] = {{"block_size", meta.kv_cache()->block_size()},
                   {"bytes_per_token", 2 * m.num_layers() * m.num_kv_heads() * m.head_dim() * 4}};
  const fb::Provenance *p = meta.provenance();
  auto s = [](const flatbuffers::String *v) { return v ? v->str() : std::string(); };
  if (p)
    j["provenance"] = {{"llmc_version", s(p->llmc_version())},
                       {"source_model", s(p->source_model())},
                       {"source_hash", s(p->source_hash())},
                       {"options", s(p->options())},
                       {"created_unix", p->created_unix()}};
  // Generation settings (tokenizer_config.json, generation_config.json).
  nlohmann::json g;
  g["eos_token_ids"] = m.eos_token_ids() ? std::vector<int64_t>(m.eos_token_ids()->begin(),
                                                                 m.eos_token_ids()->end())
                                         : std::vector<int64_t>();
  g["chat_templates"] = nlohmann::json::array();
  if (const auto *templates = meta.tokenizer()->chat_templates())
    for (const fb::ChatTemplate *t : *templates)
      g["chat_templates"].push_back({{"name", s(t->name())}, {"bytes", t->source()->size()}});
  for (auto [key, value] : {std::pair{"bos_token", meta.tokenizer()->bos_token()},
                            std::pair{"eos_token", meta.tokenizer()->eos_token()},
                            std::pair{"pad_token", meta.tokenizer()->pad_token()},
                            std::pair{"unk_token", meta.tokenizer()->unk_token()}})
    if (value != nullptr && value->size() > 0)
      g[key] = value->str();
  g["defaults"] = nlohmann::json::object();
  if (const fb::GenerationDefaults *d = meta.generation()) {
    auto put = [&](const char *key, auto v) {
      if (!v.has_value())
        return;
      if constexpr (std::is_floating_point_v<std::decay_t<decltype(*v)>>) { // 0.7f as 0.7, not 0.69999998
        char text[32];
        std::snprintf(text, sizeof(text), "%.6g", static_cast<double>(*v));
        g["defaults"][key] = std::stod(text);
      } else {
        g["defaults"][key] = *v;
      }
    };
    put("temperature", d->temperature());
    put("top_p", d->top_p());
    put("top_k", d->top_k());
    put("min_p", d->min_p());
    put("repetition_penalty", d->repetition_penalty());
    put("max_new_tokens", d->max_new_tokens());
  }
  j["generation"] = g;
  return j;
}

void printText(const nlohmann::json &j) {
  const auto &m = j["model"];
  std::printf("model       %s: %lld layers, hidden %lld, heads %lld/%lld (dim %lld), "
              "intermediate %lld, vocab %lld, max_seq_len %lld\n",
              m["architecture"].get<std::string>().c_str(), m["num_layers"].get<long long>(),
              m["hidden_size"].get<long long>(), m["num_heads"].get<long long>(),
              m["num_kv_heads"].get<long long>(), m["head_dim"].get<long long>(),
              m["intermediate_size"].get<long long>(), m["vocab_size"].get<long long>(),
              m["max_seq_len"].get<long long>());
  for (const auto &rope : m["rope"]) {
    std::printf("rope        theta %g, rotary_dim %lld%s, scaling %s", rope["theta"].get<double>(),
                rope["rotary_dim"].get<long long>(),
                rope["interleaved"].get<bool>() ? " (interleaved)" : "",
                rope["scaling"].get<std::string>().c_str());
    if (rope.contains("factor"))
      std::printf(" (factor %g)", rope["factor"].get<double>());
    std::printf("\n");
  }
  if (m.contains("attention_windows")) {
    std::string windows;
    for (const auto &window : m["attention_windows"])
      windows += (windows.empty() ? "" : " ") + std::to_string(window.get<long long>());
    std::printf("windows     %s (sliding window per layer, 0: global)\n", windows.c_str());
  }
  const auto &w = j["weights"];
  std::printf("weights     %s, %llu parameters in %llu tensors%s\n",
              w["dtype"].get<std::string>().c_str(), w["parameters"].get<unsigned long long>(),
              w["tensors"].get<unsigned long long>(),
              w["synthetic"].get<bool>() ? " (synthetic: generated at load)" : "");
  const auto &size = j["size"];
  std::printf("tokenizer   %lld tokens\n", j["tokenizer"]["vocab_size"].get<long long>());
  std::printf("size        file %llu B = metadata %llu B (tokenizer %llu B) + weights %llu B\n",
              size["file"].get<unsigned long long>(), size["metadata"].get<unsigned long long>(),
              size["tokenizer"].get<unsigned long long>(),
              size["weights"].get<unsigned long long>());
  for (const auto &p : j["programs"]) {
    std::printf("program     %s %s: %llu steps (%.1f per layer), %llu buffers, arena %llu B/token, "
                "activations written %llu B/token\n",
                p["target"].get<std::string>().c_str(), p["phase"].get<std::string>().c_str(),
                p["steps"].get<unsigned long long>(), p["steps_per_layer"].get<double>(),
                p["buffers"].get<unsigned long long>(),
                p["arena_bytes_per_token"].get<unsigned long long>(),
                p["activation_bytes_written_per_token"].get<unsigned long long>());
    std::string kernels;
    for (const auto &[name, count] : p["kernels"].items())
      kernels += " " + name + " x" + std::to_string(count.get<int>());
    std::printf("  kernels  %s\n", kernels.c_str());
  }
  if (j.contains("lm_head")) {
    const auto &h = j["lm_head"];
    const std::string format = h["weights"].get<std::string>();
    const long long group = h["group_size"].get<long long>();
    std::string storage = format == "Q4"   ? "int4 in groups of " + std::to_string(group)
                          : format == "Q8" ? (group > 0 ? "int8 in groups of " +
                                                              std::to_string(group)
                                                        : std::string("int8 per output channel"))
                                           : h["dtype"].get<std::string>();
    std::printf("lm head     %s, %llu B\n", storage.c_str(), h["bytes"].get<unsigned long long>());
  }
  for (const auto &mod : j["modules"])
    std::printf("module      %s: %llu bytes, %llu functions\n",
                mod["target"].get<std::string>().c_str(), mod["bytes"].get<unsigned long long>(),
                mod["functions"].get<unsigned long long>());
  std::printf("kv cache    block size %lld, %lld bytes per token\n",
              j["kv_cache"]["block_size"].get<long long>(),
              j["kv_cache"]["bytes_per_token"].get<long long>());
  if (j.contains("generation")) {
    const auto &g = j["generation"];
    std::string templates;
    for (const auto &t : g["chat_templates"])
      templates += (templates.empty() ? "" : ", ") + t["name"].get<std::string>() + " (" +
                   std::to_string(t["bytes"].get<unsigned long long>()) + " B)";
    std::printf("generation  eos ids %s; chat templates: %s; special tokens: %s; defaults: %s\n",
                g["eos_token_ids"].dump().c_str(), templates.empty() ? "none" : templates.c_str(),
                [&] {
                  std::string tokens;
                  for (const char *key : {"bos_token", "eos_token", "pad_token", "unk_token"})
                    if (g.contains(key))
                      tokens += (tokens.empty() ? "" : " ") + std::string(key) + "=" +
                                g[key].get<std::string>();
                  return tokens.empty() ? std::string("none") : tokens;
                }().c_str(),
                g["defaults"].empty() ? "none" : g["defaults"].dump().c_str());
  }
  if (j.contains("provenance")) {
    const auto &p = j["provenance"];
    std::printf("provenance  llmc %s, from %s (hash %s), options: %s\n",
                p["llmc_version"].get<std::string>().c_str(),
                p["source_model"].get<std::string>().c_str(),
                p["source_hash"].get<std::string>().c_str(),
                p["options"].get<std::string>().c_str());
  }
}

// The JSON text. Plan strings are bytes (a source path from a Latin-1
// folder, say): invalid UTF-8 is printed as U+FFFD, with a warning, rather
// than aborting in the JSON library.
std::string dumpJson(const nlohmann::json &j, const std::string &path) {
  try {
    return j.dump(2);
  } catch (const nlohmann::json::type_error &) {
    std::fprintf(stderr,
                 "warning: %s: some strings in the plan are not valid UTF-8 (e.g. a path "
                 "in a Latin-1 encoding); their invalid bytes are printed as U+FFFD\n",
                 path.c_str());
    return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

} // namespace

void registerInspectCommand(CLI::App &app, int &exitCode) {
  struct Options {
    std::string plan;
    bool json = false;
    bool noVerify = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App *cmd = app.add_subcommand("inspect", "Describe an engine plan");
  cmd->add_option("plan", options->plan, "Engine plan")->required();
  cmd->add_flag("--json", options->json, "Print JSON");
  cmd->add_flag("--no-verify", options->noVerify, "Skip the weight checksum");
  cmd->callback([options, &exitCode]() {
    PlanLoadOptions load;
    load.verifyWeights = !options->noVerify;
    auto plan = Plan::open(options->plan, load);
    if (!plan) {
      exitCode = cli::fail(plan.status());
      return;
    }
    // What a load checks beyond the plan itself: the embedded tokenizer parses
    // (as Engine::load parses it), so inspect says OK only on plans that run.
    auto tokenizer = Tokenizer::fromJson(plan->meta().tokenizer()->tokenizer_json()->string_view(),
                                         options->plan + " (embedded tokenizer)");
    if (!tokenizer) {
      exitCode = cli::fail(tokenizer.status());
      return;
    }
    nlohmann::json j = describe(*plan, *tokenizer);
    if (options->json)
      std::printf("%s\n", dumpJson(j, options->plan).c_str());
    else
      printText(j);
    exitCode = cli::flushStdout();
  });
}

} // namespace llmc
