// Shared behaviour of the llmc command-line tools: errors go to stderr as
// "error: <what>" with a non-zero exit, never a stack dump.
#pragma once

#include "support/status.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace llmc::cli {

inline int fail(const std::string &message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

inline int fail(const Status &status) { return fail(status.message()); }

// Flushes stdout and turns a failed write (a full disk, /dev/full, an
// I/O error) into "error: ..." and exit code 1; 0 when all output was written.
// Call it last in a command that prints its result to stdout.
inline int flushStdout() {
  const int err = std::fflush(stdout) != 0 ? errno : 0;
  if (err == 0 && !std::ferror(stdout))
    return 0;
  return fail(std::string("cannot write the output to stdout") +
              (err != 0 ? std::string(": ") + std::strerror(err) : std::string()));
}

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
