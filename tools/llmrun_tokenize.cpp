// llmrun tokenize / detokenize: text <-> token ids with a model's tokenizer.
//   llmrun tokenize <tokenizer.json | model dir> --text T [--no-special] [--json]
//   llmrun tokenize <...> --file F --bench     (encode throughput, MB/s)
//   llmrun detokenize <...> --ids 1,2,3 [--skip-special] [--json]
#include "llmrun_tokenize.h"

#include "plan/plan.h"

#include "cli_common.h"
#include "llmrun_commands.h"
#include "support/json.h"
#include "support/mapped_file.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>

namespace llmc {

Expected<Tokenizer> loadTokenizerFrom(const std::string &path) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (fs::is_directory(path, error)) {
    std::string file = (fs::path(path) / "tokenizer.json").string();
    if (!fs::is_regular_file(file, error))
      return Status::error(path + ": this folder has no tokenizer.json");
    return Tokenizer::fromFile(file);
  }
  if (!fs::exists(path, error))
    return Status::error(path + ": no such file or folder");
  if (fs::path(path).extension() == ".json")
    return Tokenizer::fromFile(path);
  // Anything else must be an engine plan: its metadata embeds the tokenizer.
  PlanLoadOptions options;
  options.verifyWeights = false; // the tokenizer needs only the metadata
  auto plan = Plan::open(path, options);
  if (!plan)
    return Status::error(plan.message() +
                         " (expected a tokenizer.json, a model folder holding one, or an engine "
                         "plan)");
  return Tokenizer::fromJson(plan->meta().tokenizer()->tokenizer_json()->string_view(),
                             path + ": embedded tokenizer");
}

namespace {

struct TokenizeOptions {
  std::string source;
  std::string text;
  std::string file;
  bool noSpecial = false;
  bool json = false;
  bool bench = false;
};

struct DetokenizeOptions {
  std::string source;
  std::string ids;
  bool skipSpecial = false;
  bool json = false;
};

Expected<Tokenizer> load(const std::string &source) {
  LLMC_ASSIGN_OR_RETURN(Tokenizer tokenizer, loadTokenizerFrom(source));
  for (const std::string &warning : tokenizer.warnings())
    std::fprintf(stderr, "warning: %s\n", warning.c_str());
  return tokenizer;
}

// Encodes and decodes `text` repeatedly (at least 3 runs and 1 s) and
// reports the throughput of the median and of the fastest run (the latter is
// the steadier figure on a shared machine).
int bench(const Tokenizer &tokenizer, const std::string &text, bool addSpecial) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> encodeSeconds, decodeSeconds;
  std::vector<int32_t> ids;
  auto start = Clock::now();
  while (encodeSeconds.size() < 3 || Clock::now() - start < std::chrono::seconds(1)) {
    auto t0 = Clock::now();
    ids = tokenizer.encode(text, addSpecial);
    auto t1 = Clock::now();
    std::string decoded = tokenizer.decode(ids);
    auto t2 = Clock::now();
    encodeSeconds.push_back(std::chrono::duration<double>(t1 - t0).count());
    decodeSeconds.push_back(std::chrono::duration<double>(t2 - t1).count());
  }
  std::sort(encodeSeconds.begin(), encodeSeconds.end());
  std::sort(decodeSeconds.begin(), decodeSeconds.end());
  double megabytes = text.size() / 1e6;
  size_t middle = encodeSeconds.size() / 2;
  std::printf("%zu bytes -> %zu ids (%.2f bytes/id), %zu runs: encode %.1f MB/s median, %.1f MB/s "
              "best; decode %.1f MB/s median, %.1f MB/s best\n",
              text.size(), ids.size(), double(text.size()) / std::max<size_t>(ids.size(), 1),
              encodeSeconds.size(), megabytes / encodeSeconds[middle], megabytes / encodeSeconds[0],
              megabytes / decodeSeconds[middle], megabytes / decodeSeconds[0]);
  return cli::flushStdout();
}

int runTokenize(const TokenizeOptions &o) {
  std::string text = o.text;
  if (!o.file.empty()) {
    auto contents = readTextFile(o.file);
    if (!contents)
      return cli::fail(contents.status());
    text = std::move(contents).value();
  }
  auto tokenizer = load(o.source);
  if (!tokenizer)
    return cli::fail(tokenizer.status());
  if (o.bench) {
    if (auto check = tokenizer->tryEncode(text, !o.noSpecial); !check)
      return cli::fail(check.status());
    return bench(*tokenizer, text, !o.noSpecial);
  }
  auto encoded = tokenizer->tryEncode(text, !o.noSpecial);
  if (!encoded)
    return cli::fail(encoded.status());
  std::vector<int32_t> ids = std::move(encoded).value();
  if (o.json) {
    std::printf("%s\n", Json{{"ids", ids}}.dump().c_str());
    return cli::flushStdout();
  }
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i)
    line += (i ? " " : "") + std::to_string(ids[i]);
  std::printf("%s\n", line.c_str());
  return cli::flushStdout();
}

// "1,2, 3" or "1 2 3" -> ids, each checked against the vocabulary.
Expected<std::vector<int32_t>> parseIds(const std::string &list, int32_t vocabSize) {
  std::vector<int32_t> ids;
  std::string item;
  auto flush = [&]() -> Status {
    if (item.empty())
      return Status::ok();
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(item, &used);
    } catch (const std::exception &) {
      used = 0;
    }
    if (used != item.size())
      return Status::error("--ids: '" + item + "' is not an integer");
    if (id < 0 || id >= vocabSize)
      return Status::error("--ids: id " + item + " is out of range [0, " +
                           std::to_string(vocabSize) + ")");
    ids.push_back(static_cast<int32_t>(id));
    item.clear();
    return Status::ok();
  };
  for (char c : list) {
    if (c == ',' || c == ' ')
      LLMC_RETURN_IF_ERROR(flush());
    else
      item += c;
  }
  LLMC_RETURN_IF_ERROR(flush());
  return ids;
}

int runDetokenize(const DetokenizeOptions &o) {
  auto tokenizer = load(o.source);
  if (!tokenizer)
    return cli::fail(tokenizer.status());
  auto ids = parseIds(o.ids, tokenizer->vocabSize());
  if (!ids)
    return cli::fail(ids.status());
  std::string text = tokenizer->decode(*ids, o.skipSpecial);
  // Ids may end inside a UTF-8 sequence: JSON shows such bytes as U+FFFD,
  // the plain form writes them as they are.
  if (o.json)
    text = Json{{"text", text}}.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  return cli::flushStdout();
}

const char *const kSourceHelp = "tokenizer.json, or a model folder that holds one";

} // namespace

void registerTokenizeCommands(CLI::App &app, int &exitCode) {
  auto tokenize = std::make_shared<TokenizeOptions>();
  CLI::App *encode = app.add_subcommand("tokenize", "Print the token ids of a text");
  encode->add_option("source", tokenize->source, kSourceHelp)->required();
  CLI::Option *text = encode->add_option("--text", tokenize->text, "The text to encode");
  CLI::Option *file =
      encode->add_option("--file", tokenize->file, "Encode this file's contents instead");
  text->excludes(file);
  encode->add_flag("--no-special", tokenize->noSpecial,
                   "Add no BOS/EOS (Hugging Face add_special_tokens=False); special tokens "
                   "written in the text are still recognised");
  encode->add_flag("--json", tokenize->json, "Print {\"ids\": [...]}");
  encode->add_flag("--bench", tokenize->bench,
                   "Measure encode/decode throughput (MB/s) on the text instead of printing ids");
  encode->callback([tokenize, text, file, &exitCode] {
    if (text->count() == 0 && file->count() == 0) {
      exitCode = cli::fail("tokenize: give --text or --file");
      return;
    }
    exitCode = runTokenize(*tokenize);
  });

  auto detokenize = std::make_shared<DetokenizeOptions>();
  CLI::App *decode = app.add_subcommand("detokenize", "Print the text of token ids");
  decode->add_option("source", detokenize->source, kSourceHelp)->required();
  decode->add_option("--ids", detokenize->ids, "Token ids, e.g. 1,2,3")->required();
  decode->add_flag("--skip-special", detokenize->skipSpecial, "Leave out special tokens");
  decode->add_flag("--json", detokenize->json, "Print {\"text\": \"...\"}");
  decode->callback([detokenize, &exitCode] { exitCode = runDetokenize(*detokenize); });
}

} // namespace llmc
