// Fuzz target for the tokenizer.json importer: any input must import or fail
// with an error, never crash. When it imports, a few texts (special tokens,
// spaces, invalid UTF-8) are encoded, decoded and stream decoded.
#include "tokenizer/tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view json(reinterpret_cast<const char *>(data), size);
  auto tokenizer = llmc::Tokenizer::fromJson(json, "fuzz/tokenizer.json");
  if (!tokenizer.isOk())
    return 0;
  std::string longText; // over 64 symbols: the long-word merge paths
  for (int i = 0; i < 20; ++i)
    longText += "aab▁héllo-x1 ";
  for (std::string_view text : {std::string_view("ab ab-x1 [M] <s>é"),
                                std::string_view("  hello\n\n<|endoftext|>\xff\xe2\x82"),
                                std::string_view(), std::string_view(longText)}) {
    auto checked = tokenizer->tryEncode(text, true); // an error is fine, a crash is not
    std::vector<int32_t> ids = checked ? std::move(checked).value() : std::vector<int32_t>();
    std::string decoded = tokenizer->decode(ids, false);
    llmc::StreamDecoder stream(*tokenizer, true);
    for (int32_t id : ids)
      decoded += stream.step(id);
    decoded += stream.flush();
  }
  std::vector<int32_t> every;
  for (int32_t id = -1; id <= tokenizer->vocabSize() && id < 300; ++id)
    every.push_back(id);
  (void)tokenizer->decode(every, true);
  return 0;
}
