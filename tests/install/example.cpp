// A C++ program over the installed C API (tests/install): RAII around the
// handles, errors through llmc_last_error, the text through a lambda.
#include <llmc/llmc.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

struct EngineCloser {
  void operator()(llmc_engine *e) const { llmc_engine_close(e); }
};

[[noreturn]] void die(const char *what) {
  std::fprintf(stderr, "error: %s: %s\n", what, llmc_last_error());
  std::exit(1);
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2)
    return 2;
  llmc_engine *raw = nullptr;
  llmc_engine_options options;
  llmc_engine_options_init(&options);
  options.device = "cpu";
  if (llmc_engine_open(argv[1], &options, &raw) != LLMC_STATUS_OK)
    die("open");
  std::unique_ptr<llmc_engine, EngineCloser> engine(raw);

  // A bad call reports a message and changes nothing.
  if (llmc_engine_open("/nonexistent.plan", nullptr, &raw) == LLMC_STATUS_OK || raw != nullptr)
    die("opening a missing plan succeeded");
  std::printf("missing plan: %s\n", llmc_last_error());

  std::string text;
  auto append = [](const char *piece, size_t length, void *user) {
    static_cast<std::string *>(user)->append(piece, length);
    return 0;
  };
  llmc_generate_params params;
  llmc_generate_params_init(&params);
  params.max_new_tokens = 30;
  const std::string prompt = "Once upon a time";
  llmc_generate_result result;
  if (llmc_generate(engine.get(), prompt.data(), prompt.size(), &params, append, &text, &result) !=
      LLMC_STATUS_OK)
    die("generate");
  std::printf("c++: %s%s\n", prompt.c_str(), text.c_str());
  return result.generated_tokens > 0 ? 0 : 1;
}
