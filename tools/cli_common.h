// Shared behaviour of the llmc command-line tools: errors go to stderr as
// "error: <what>" with a non-zero exit, never a stack dump; parse errors are
// reported in the order given (the first bad argument wins), an unknown flag
// with the nearest known flag ("did you mean --temperature?"); log levels;
// the dtype spellings users type.
#pragma once

#include "support/status.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace llmc::cli {

inline int fail(const std::string &message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

inline int fail(const Status &status) { return fail(status.message()); }

// Levenshtein distance, for "did you mean".
inline size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The known long flag nearest to `flag` ("--temprature" -> "--temperature"),
// or "" when none is close.
inline std::string nearestFlag(const CLI::App &command, const std::string &flag) {
  std::string best;
  size_t bestDistance = std::max<size_t>(2, flag.size() / 3) + 1;
  for (const CLI::Option *option : command.get_options()) {
    for (const std::string &name : option->get_lnames()) {
      const std::string candidate = "--" + name;
      size_t distance = editDistance(flag, candidate);
      // A prefix of a known flag ("--temp" of "--temperature") is close too.
      if (candidate.compare(0, flag.size(), flag) == 0 && flag.size() >= 4)
        distance = std::min<size_t>(distance, 1);
      if (distance < bestDistance) {
        bestDistance = distance;
        best = candidate;
      }
    }
  }
  return best;
}

inline bool looksLikeNumber(const std::string &arg) {
  return arg.size() > 1 && (std::isdigit(static_cast<unsigned char>(arg[1])) || arg[1] == '.');
}

// The error CLI11 would give for `value` of `option` (its type conversion
// and validators: "--temperature: Value -1 not in range ..."), or "".
// Leaves the option without results; the real parse sets them again.
inline std::string valueError(CLI::Option &option, const std::string &value) {
  std::string error;
  try {
    option.clear();
    option.add_result(value);
    option.run_callback();
  } catch (const CLI::ParseError &e) {
    error = e.what();
  }
  option.clear();
  return error;
}

// The positional options of a command in the order they take arguments,
// each as many times as it takes values (one entry with `unbounded` set for
// one that takes the rest).
struct PositionalSlots {
  std::vector<CLI::Option *> slots;
  CLI::Option *rest = nullptr;
  size_t next = 0;

  explicit PositionalSlots(CLI::App &command) {
    for (CLI::Option *option : command.get_options()) {
      if (!option->get_positional())
        continue;
      const int count = option->get_items_expected_max();
      if (count >= CLI::detail::expected_max_vector_size || count < 0) {
        rest = option;
        break;
      }
      for (int i = 0; i < count; ++i)
        slots.push_back(option);
    }
  }
  // The option taking the next positional argument, or null when none does.
  CLI::Option *take() { return next < slots.size() ? slots[next++] : rest; }
};

// The first bad argument in the order given (so that the first mistake is
// the one reported, whatever order CLI11 checks in): an option no option
// of its command knows ("unknown option '--temp'; did you mean
// --temperature?"), an option missing its value, a value its option's type
// or validators refuse, a positional argument nothing takes. "" when none:
// CLI11 then reports what is left (a missing required option, options that
// exclude each other).
inline std::string firstArgumentError(CLI::App &app, int argc, char **argv) {
  CLI::App *command = &app;
  PositionalSlots positionals(app);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--")
      break;
    if (arg.size() < 2 || arg[0] != '-' || looksLikeNumber(arg)) {
      if (command == &app) {
        CLI::App *sub = nullptr;
        for (CLI::App *candidate : app.get_subcommands([](CLI::App *) { return true; }))
          if (candidate->check_name(arg))
            sub = candidate;
        if (sub != nullptr) {
          command = sub;
          positionals = PositionalSlots(*sub);
          continue;
        }
      }
      CLI::Option *positional = positionals.take();
      if (positional == nullptr) {
        if (command->get_allow_extras())
          continue;
        return "unexpected argument '" + arg + "'" +
               (command == &app ? std::string() : " for '" + command->get_name() + "'");
      }
      if (std::string error = valueError(*positional, arg); !error.empty())
        return error;
      continue;
    }
    const bool isLong = arg.compare(0, 2, "--") == 0;
    const size_t equals = arg.find('=');
    const std::string name = isLong ? arg.substr(0, equals) : arg.substr(0, 2);
    CLI::Option *option = command->get_option_no_throw(name);
    if (option == nullptr && command != &app && (name == "--version"))
      option = app.get_option_no_throw(name);
    if (option == nullptr) {
      std::string message = "unknown option '" + name + "'";
      if (isLong) {
        std::string nearest = nearestFlag(*command, name);
        if (!nearest.empty())
          message += "; did you mean " + nearest + "?";
      }
      return message;
    }
    const bool takesValue = option->get_type_size_min() > 0 && option->get_expected_min() > 0;
    // An optional value (expected(0, 1), e.g. llmc's --synthetic-weights [SEED]) is the next
    // argument when that is not a flag, as CLI11 takes it.
    const bool mayTakeValue = !takesValue && option->get_type_size_max() > 0 &&
                              option->get_expected_max() > 0;
    const bool attached = isLong ? equals != std::string::npos : arg.size() > 2;
    std::string value;
    if (!takesValue && !mayTakeValue) {
      continue;
    } else if (attached) {
      value = isLong ? arg.substr(equals + 1) : arg.substr(2);
    } else if (takesValue && i + 1 < argc) {
      value = argv[++i]; // whatever it looks like ("-p -", "--temperature -1")
    } else if (takesValue) {
      return "option " + name + " needs a value";
    } else if (i + 1 < argc && (argv[i + 1][0] != '-' || looksLikeNumber(argv[i + 1]))) {
      value = argv[++i];
    } else {
      continue;
    }
    if (std::string error = valueError(*option, value); !error.empty())
      return error;
  }
  return std::string();
}

// Flushes stdout: a failed write (a full disk, /dev/full, a closed pipe, an
// I/O error) is an error. Call it last in a command that prints its result.
inline Status stdoutWritten() {
  const int err = std::fflush(stdout) != 0 ? errno : 0;
  if (err == 0 && !std::ferror(stdout))
    return Status::ok();
  return Status::error(std::string("cannot write the output to stdout") +
                       (err != 0 ? std::string(": ") + std::strerror(err) : std::string()));
}

// stdoutWritten() as a command's exit code: 0, or 1 after "error: ...".
inline int flushStdout() {
  Status written = stdoutWritten();
  return written ? 0 : fail(written);
}

// Parses argv; prints help/version or "error: ..." for bad usage.
// Returns -1 when the caller should go on, else the exit code.
inline int parseArgs(CLI::App &app, int argc, char **argv) {
  std::string unknown = firstArgumentError(app, argc, argv);
  bool wantsHelp = false;
  for (int i = 1; i < argc; ++i)
    wantsHelp |= std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0;
  if (!unknown.empty() && !wantsHelp) {
    std::fprintf(stderr, "error: %s\n", unknown.c_str());
    std::fprintf(stderr, "run '%s --help' for usage\n", app.get_name().c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    std::fprintf(stderr, "run '%s --help' for usage\n", app.get_name().c_str());
    return 2;
  }
  return -1;
}

// What the tools print besides their results (stderr): -q shows errors
// only, -v adds details (the seed, settings taken from the plan).
enum class LogLevel { Error = 0, Warning = 1, Info = 2, Debug = 3 };

struct LogFlags {
  bool quiet = false;
  bool verbose = false;
  std::string level; // --log-level: error, warning, info, debug

  void add(CLI::App &command) {
    command.add_flag("-q,--quiet", quiet, "Print only errors on stderr");
    command.add_flag("-v,--verbose", verbose, "Also print details (the seed, plan defaults)");
    command.add_option("--log-level", level, "error, warning, info (default) or debug")
        ->check(CLI::IsMember({"error", "warning", "info", "debug"}));
  }
  LogLevel get() const {
    if (!level.empty())
      return level == "error"     ? LogLevel::Error
             : level == "warning" ? LogLevel::Warning
             : level == "debug"   ? LogLevel::Debug
                                  : LogLevel::Info;
    return quiet ? LogLevel::Error : verbose ? LogLevel::Debug : LogLevel::Info;
  }
};

// --dtype spellings of PyTorch, vLLM and llama.cpp users, to llmc's names.
inline const std::map<std::string, std::string> &dtypeAliases() {
  static const std::map<std::string, std::string> aliases = {
      {"float32", "f32"}, {"fp32", "f32"},  {"float", "f32"},     {"float16", "f16"},
      {"fp16", "f16"},    {"half", "f16"},  {"bfloat16", "bf16"}, {"f32", "f32"},
      {"f16", "f16"},     {"bf16", "bf16"}};
  return aliases;
}


} // namespace llmc::cli
