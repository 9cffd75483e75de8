// Microsoft's Phi-3 and Phi-3.5 (Phi3ForCausalLM): Llama's block (pre-norm
// RMSNorm, GQA, SwiGLU, untied by default) with its projections packed:
//   self_attn.qkv_proj.weight   [Q + 2K, H]: q rows, then k, then v
//   mlp.gate_up_proj.weight     [2I, H]:     gate rows, then up
// split at import (derivedTensors) into Llama's q/k/v_proj and
// gate/up_proj, so the graph is the Llama decoder's. RoPE: default or
// longrope (also spelled "su") with short and long factors and the
// top-level original_max_position_embeddings; partial_rotary_factor;
// sliding_window (null: full attention) on every layer. Phi3Config refuses
// other rope types and reads "yarn" as longrope: both are refused here.
#pragma once

#include "models/architecture.h"

namespace llmc {

const Architecture &phi3ForCausalLM();

} // namespace llmc
