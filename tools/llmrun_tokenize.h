// Where llmrun finds a tokenizer: the one place that turns a path given on
// the command line into a Tokenizer (llmrun_tokenize.cpp).
#pragma once

#include "support/status.h"
#include "tokenizer/tokenizer.h"

#include <string>

namespace llmc {

// Accepts a tokenizer.json file, a model folder that holds one, or an engine
// plan (whose metadata embeds its tokenizer). Anything else is an error
// saying what was expected.
Expected<Tokenizer> loadTokenizerFrom(const std::string &path);

} // namespace llmc
