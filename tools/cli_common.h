// Shared behaviour of the llmc command-line tools: errors go to stderr as
// "error: <what>" with a non-zero exit, never a stack dump.
#pragma once

#include "support/status.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

namespace llmc::cli {

inline int fail(const std::string &message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

inline int fail(const Status &status) { return fail(status.message()); }

// Parses argv; prints help/version or "error: ..." for bad usage.
// Returns -1 when the caller should go on, else the exit code.
inline int parseArgs(CLI::App &app, int argc, char **argv) {
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

} // namespace llmc::cli
