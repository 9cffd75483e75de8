// Subcommand registration for llmrun. A subcommand file defines one
// registrar and lists it in llmrunCommandRegistrars() (llmrun_commands.cpp).
// A registrar adds its CLI11 subcommand to `app`; the subcommand's callback
// stores its exit status in `exitCode`.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <vector>

namespace llmc {

using CommandRegistrar = std::function<void(CLI::App &app, int &exitCode)>;

void registerTokenizeCommands(CLI::App &app, int &exitCode);  // llmrun_tokenize.cpp
void registerInspectCommand(CLI::App &app, int &exitCode);    // llmrun_inspect.cpp
void registerPerplexityCommand(CLI::App &app, int &exitCode); // llmrun_perplexity.cpp
void registerBenchCommand(CLI::App &app, int &exitCode);      // llmrun_bench.cpp
void registerServeCommand(CLI::App &app, int &exitCode);      // llmrun_serve.cpp
void registerBenchServeCommand(CLI::App &app, int &exitCode); // llmrun_bench_serve.cpp
void registerChatTemplateCommand(CLI::App &app, int &exitCode); // llmrun_chat_template.cpp
void registerChatCommand(CLI::App &app, int &exitCode);       // llmrun_chat.cpp

inline std::vector<CommandRegistrar> llmrunCommandRegistrars() {
  return {registerTokenizeCommands, registerInspectCommand, registerPerplexityCommand,
          registerBenchCommand, registerServeCommand, registerBenchServeCommand,
          registerChatTemplateCommand, registerChatCommand};
}

// The default mode, `llmrun engine.plan -p PROMPT ...` (llmrun_generate.cpp):
// adds its positional plan and options to the main app; runGenerate() runs it
// when no subcommand was given.
struct GenerateCommand;
GenerateCommand *addGenerateOptions(CLI::App &app);
int runGenerate(GenerateCommand &command);

} // namespace llmc
