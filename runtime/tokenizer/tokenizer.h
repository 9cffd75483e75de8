// Hugging Face tokenizer.json support: import, encode, decode, stream decode.
//
// Supported: BPE models of both families used by LLMs
//   - byte-level (GPT-2, Llama 3, Qwen2): ByteLevel / Split pre-tokenizers,
//     ByteLevel decoder;
//   - SentencePiece-style (Llama 2, Mistral, stories260K): Prepend / Replace
//     normalizers or a Metaspace pre-tokenizer, byte_fallback, fuse_unk,
//     unk_token, ByteFallback / Fuse / Strip / Replace decoders;
// plus added tokens, TemplateProcessing, and the other components listed in
// normalizers.h, pre_tokenizers.h, decoders.h and post_processor.h.
// Anything else (another model type, an unknown component or field, an
// inconsistent vocabulary) is an import error that names the file and the
// JSON field: a tokenizer that imports encodes exactly as Hugging Face's
// `tokenizers` library does.
#pragma once

#include "support/status.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llmc {

class Tokenizer {
public:
  // Imports tokenizer.json text; `source` names it in errors (a path or
  // "engine.plan: tokenizer"). The text is kept, see sourceJson().
  static Expected<Tokenizer> fromJson(std::string_view jsonText, const std::string &source);
  static Expected<Tokenizer> fromFile(const std::string &path);

  // Hugging Face's encode(text, add_special_tokens=addSpecialTokens).ids.
  // Added/special tokens written in `text` are always matched; only the
  // post-processor's tokens (e.g. BOS) depend on addSpecialTokens. Invalid
  // UTF-8 in `text` is first repaired (each ill-formed sequence -> U+FFFD).
  std::vector<int32_t> encode(std::string_view text, bool addSpecialTokens) const;

  // Hugging Face's decode(ids, skip_special_tokens). Ids outside
  // [0, vocabSize()) are skipped, as Hugging Face does.
  std::string decode(const std::vector<int32_t> &ids, bool skipSpecialTokens = false) const;

  // One past the highest id (ids are dense: model vocabulary + added tokens).
  int32_t vocabSize() const;
  std::optional<int32_t> tokenToId(std::string_view token) const;
  std::optional<std::string> idToToken(int32_t id) const;
  // True for added tokens marked "special" (skipped by skipSpecialTokens).
  bool isSpecial(int32_t id) const;

  // The id the post-processor puts first (e.g. Llama's <s>), if any.
  std::optional<int32_t> bosId() const;
  // The id the post-processor puts last, else the first special added token
  // among </s>, <|endoftext|>, <|end_of_text|>, <eos>, <|im_end|>. An engine
  // should prefer generation_config.json's eos_token_id when it has one.
  std::optional<int32_t> eosId() const;

  // Things the import tolerated that a user should hear about, one message
  // each, naming the file and field: a merge whose merged token is not in the
  // vocabulary (Hugging Face rejects the file; llmc ignores the merge).
  const std::vector<std::string> &warnings() const;

  // The tokenizer.json text this tokenizer was imported from.
  const std::string &sourceJson() const;

private:
  Tokenizer() = default;

  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// Decodes ids one at a time (as a model generates them) into text pieces
// that are always complete UTF-8: a character whose bytes span several
// tokens is held back until its last byte arrives. The concatenation of
// every step() and the final flush() equals tokenizer.decode(all ids).
//
// Method (the one Hugging Face's DecodeStream uses): decode the pending ids
// together with the ids of the previous piece as context, and emit what
// extends the context's text, so decoders that depend on position (Strip,
// Metaspace) behave as in a full decode. Held back: text ending in U+FFFD.
class StreamDecoder {
public:
  explicit StreamDecoder(Tokenizer tokenizer, bool skipSpecialTokens = false);
  // Starts with `context` (e.g. the end of the prompt) as the previous piece,
  // so the text emitted is decode(context + ids) minus decode(context): a
  // SentencePiece tokenizer then keeps the space before the first generated
  // word, which a decode from the start strips.
  StreamDecoder(Tokenizer tokenizer, std::vector<int32_t> context, bool skipSpecialTokens);

  // Adds one id; returns the text it completes (often empty).
  std::string step(int32_t id);
  // Returns the text still held back (e.g. an incomplete character, as
  // U+FFFD) and starts over.
  std::string flush();

private:
  std::string emitBeyondPrefix(const std::string &text) const;

  Tokenizer tokenizer_;
  bool skipSpecialTokens_;
  std::vector<int32_t> ids_; // context ids, then pending ids
  size_t contextCount_ = 0;  // how many of ids_ are context
  std::string contextText_;  // decode of the context ids
};

} // namespace llmc
