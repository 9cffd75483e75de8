// LG AI Research's EXAONE 3.0 and 3.5 (ExaoneForCausalLM). transformers
// 5.24 has no class of its own: ExaoneConfig (model_type "exaone") maps onto
// LlamaForCausalLM and the checkpoint's tensors are renamed at load
// (conversion_mapping.py), so EXAONE 3.x computes Llama. What differs is
// what LG publishes:
//   - config names (ExaoneConfig.attribute_map): `num_layers` for
//     num_hidden_layers, `layer_norm_epsilon` for rms_norm_eps (default
//     1e-5), `activation_function` for hidden_act (default "silu"); either
//     spelling is read, both with different values is refused;
//     rope_theta defaults to 500000; rope_scaling as Llama's (EXAONE 3.5
//     writes llama3); `attention_bias`, `mlp_bias`, `head_dim` and
//     `num_key_value_heads` as Llama's; tie_word_embeddings defaults to
//     false (EXAONE 3.5 2.4B ties);
//   - tensor names, read as Llama's (derivedTensors, no copy):
//       transformer.wte.weight                   model.embed_tokens.weight
//       transformer.h.N.ln_1.weight              model.layers.N.input_layernorm.weight
//       transformer.h.N.attn.attention.{q,k,v}_proj.{weight,bias}
//                                                model.layers.N.self_attn.{q,k,v}_proj.*
//       transformer.h.N.attn.attention.out_proj.*  model.layers.N.self_attn.o_proj.*
//       transformer.h.N.ln_2.weight              model.layers.N.post_attention_layernorm.weight
//       transformer.h.N.mlp.c_fc_0.*             model.layers.N.mlp.gate_proj.*
//       transformer.h.N.mlp.c_fc_1.*             model.layers.N.mlp.up_proj.*
//       transformer.h.N.mlp.c_proj.*             model.layers.N.mlp.down_proj.*
//       transformer.ln_f.weight                  model.norm.weight
//       lm_head.weight                           (the same name; absent when tied)
#pragma once

#include "models/architecture.h"

#include <string>

namespace llmc {

const Architecture &exaoneForCausalLM();

// The published EXAONE 3.x name of Llama tensor `llamaName` (the table above).
std::string exaoneTensorName(const std::string &llamaName);

} // namespace llmc
