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

void registerTokenizeCommands(CLI::App &app, int &exitCode); // llmrun_tokenize.cpp

inline std::vector<CommandRegistrar> llmrunCommandRegistrars() {
  return {registerTokenizeCommands};
}

} // namespace llmc
