// llmrun: runs engine plans (generate, and the tool subcommands).
// Each subcommand lives in its own llmrun_<name>.cpp and registers itself here.
#include "cli_common.h"
#include "llmrun_commands.h"

#ifndef LLMC_VERSION
#define LLMC_VERSION "0.0.0"
#endif

int main(int argc, char **argv) {
  CLI::App app{"llmrun: run llmc engine plans"};
  app.name("llmrun");
  app.set_version_flag("--version", std::string("llmrun ") + LLMC_VERSION);
  app.require_subcommand(0, 1);
  app.footer("Generate: llmrun engine.plan -p \"Once upon a time\" [-n 128]\n"
             "Subcommands: tokenize, detokenize, inspect, perplexity, bench (each has --help)");
  int exitCode = 0;
  for (const auto &registerCommand : llmc::llmrunCommandRegistrars())
    registerCommand(app, exitCode);
  llmc::GenerateCommand *generate = llmc::addGenerateOptions(app);
  if (int code = llmc::cli::parseArgs(app, argc, argv); code >= 0)
    return code;
  if (app.get_subcommands().empty())
    return llmc::runGenerate(*generate);
  return exitCode;
}
