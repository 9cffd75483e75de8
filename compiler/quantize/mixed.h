// Mixed-precision plans (`llmc build --quantize rtn|gptq --mixed RECIPE`):
// per linear, the method's int4, int8 (quantize/int8.h, W8A16) or the
// plan's float dtype, chosen by a recipe the user names, as llama.cpp's
// Q4_K_M keeps attn_v and ffn_down of some layers at higher precision.
//
// A recipe is a comma-separated list of rules `NAME[@LAYERS]=FORMAT`:
//   NAME    one dot-separated component of the linear's weight name
//           ("down_proj", "v_proj", "mlp", "self_attn", "fc1", ...): the
//           rule applies to every linear whose name has it
//   LAYERS  optional: `N` or `A-B` (inclusive) or `A-` (A to the last),
//           the layer index: the first all-digit component of the name
//           (`model.layers.N.`); a name without one matches no rule with
//           LAYERS
//   FORMAT  int4 (the --quantize method's, --group-size), int8 (per output
//           channel, f32 scales) or float (the plan's dtype)
// Every linear starts as int4; rules apply in order, the last match wins:
// `mlp=int8,up_proj@2-=int4` keeps the MLPs int8 but up_proj from layer 2 on.
//
// How the stages share the work: llm-quantize leaves the int8 and float
// linears in float (QuantizeConfig::floatWeights), the fusion passes fuse
// only linears stored alike, and after lowering quantizePlanLinearsQ8
// rounds the matrices the recipe names int8.
#pragma once

#include "support/status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llmc::quant {

enum class LinearFormat { Int4, Int8, Float };

// "int4", "int8", "float".
const char *linearFormatName(LinearFormat format);

struct MixedRule {
  std::string component;                       // matches one dot-separated part of the name
  std::optional<int64_t> firstLayer, lastLayer; // inclusive; none: every linear
  LinearFormat format = LinearFormat::Int4;

  // Whether the rule names the linear whose weight is `weightName`.
  bool matches(const std::string &weightName) const;
};

struct MixedRecipe {
  std::string text; // as given to --mixed
  std::vector<MixedRule> rules;

  bool empty() const { return rules.empty(); }
  // The format of the linear whose weight is `weightName`
  // ("model.layers.3.mlp.down_proj.weight"); Int4 when no rule matches.
  LinearFormat formatOf(const std::string &weightName) const;
};

// Parses `text` (the --mixed value). Errors name the rule, what is wrong
// and the accepted spelling.
Expected<MixedRecipe> parseMixedRecipe(const std::string &text);

// The layer index of a weight name: its first all-digit component
// ("model.layers.3.mlp.up_proj.weight" -> 3), if it has one.
std::optional<int64_t> decoderLayerOf(const std::string &weightName);

} // namespace llmc::quant
