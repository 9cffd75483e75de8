// llmrun: runs engine plans (generate, and the tool subcommands).
// Each subcommand lives in its own llmrun_<name>.cpp and registers itself here.
#include "cli_common.h"
#include "llmrun_commands.h"

#include <cstring>
#include <vector>

#ifndef LLMC_VERSION
#define LLMC_VERSION "0.0.0"
#endif

int main(int argc, char **argv) {
  CLI::App app{"llmrun: run llmc engine plans"};
  app.name("llmrun");
  app.set_version_flag("--version", std::string("llmrun ") + LLMC_VERSION);
  app.require_subcommand(0, 1);
  app.footer("Generate: llmrun engine.plan -p \"Once upon a time\" [-n 128] [--temp 0.8]\n"
             "Chat:     llmrun chat engine.plan [-sys \"You are helpful.\"]\n"
             "Subcommands: chat, chat-template, serve, bench serve, tokenize, detokenize, inspect, "
             "perplexity, bench, help (each has --help)");
  int exitCode = 0;
  for (const auto &registerCommand : llmc::llmrunCommandRegistrars())
    registerCommand(app, exitCode);
  CLI::App *help = app.add_subcommand("help", "Show this help");
  help->callback([&app]() { std::fputs(app.help().c_str(), stdout); });
  llmc::GenerateCommand *generate = llmc::addGenerateOptions(app);
  // llama.cpp's "-sys TEXT" for chat (a multi-letter short flag CLI11 cannot
  // declare); not a value ("-p -sys" stays a prompt).
  std::vector<char *> args(argv, argv + argc);
  static char systemPrompt[] = "--system-prompt";
  const bool chat = argc > 1 && std::strcmp(argv[1], "chat") == 0;
  for (int i = 2; chat && i < argc; ++i)
    if (std::strcmp(args[i], "-sys") == 0 && std::strcmp(args[i - 1], "--system-prompt") != 0)
      args[i] = systemPrompt;
  // `llmrun bench serve ...` (vllm bench serve's spelling) is the bench-serve
  // command: `bench` itself takes a plan as its first argument.
  static char benchServe[] = "bench-serve";
  std::vector<char *> benchArgs;
  if (argc > 2 && std::strcmp(args[1], "bench") == 0 && std::strcmp(args[2], "serve") == 0) {
    benchArgs.push_back(args[0]);
    benchArgs.push_back(benchServe);
    benchArgs.insert(benchArgs.end(), args.begin() + 3, args.end());
    args = benchArgs;
    argc = static_cast<int>(args.size());
  }
  if (int code = llmc::cli::parseArgs(app, argc, args.data()); code >= 0)
    return code;
  if (app.get_subcommands().empty())
    return llmc::runGenerate(*generate);
  return exitCode;
}
