// RUN: rm -rf %t && mkdir -p %t
// RUN: cp %S/Inputs/tokenizer.json %t/tokenizer.json
// RUN: echo '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", \
// RUN:   "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, \
// RUN:   "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, \
// RUN:   "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, \
// RUN:   "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, \
// RUN:     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, \
// RUN:   "tie_word_embeddings": false, "bos_token_id": 128000, "eos_token_id": 128001, \
// RUN:   "torch_dtype": "bfloat16"}' > %t/config.json
// RUN: llmc build %t --synthetic-weights --emit mlir > %t.mlir
// RUN: %python -c "import os, sys; n = os.path.getsize(sys.argv[1]); \
// RUN:   print('IR bytes:', n); sys.exit(0 if n < 300 * 1024 else 1)" %t.mlir \
// RUN:   | FileCheck %s --check-prefix=SIZE
// RUN: FileCheck %s < %t.mlir
// RUN: FileCheck %s --check-prefix=WEIGHTS < %t.mlir

// Tests that a Llama-3-8B-shaped config (no weights: --synthetic-weights)
// imports into IR that refers to its weights by name and prints in well
// under 300 KB (the weights themselves are 15 GiB of bf16). Not a timing
// test: docs/perf.md has the time.

// SIZE: IR bytes: {{[0-9]+}}

// CHECK-LABEL: func.func @forward({{.*}}) -> tensor<?x128256xf32>
// CHECK:       llm.weight "model.embed_tokens.weight" : tensor<128256x4096xbf16>
// CHECK:       llm.weight "model.layers.0.self_attn.k_proj.weight" : tensor<1024x4096xbf16>
// CHECK:       llm.rope {{.*}} num_heads 32 head_dim 128 theta 5.000000e+05 scaling <llama3, factor = 8.000000e+00, low_freq_factor = 1.000000e+00, high_freq_factor = 4.000000e+00, original_max_position_embeddings = 8192>
// CHECK:       llm.attention {{.*}} layer 0 num_heads 32 num_kv_heads 8 head_dim 128
// CHECK:       llm.weight "model.layers.0.mlp.gate_proj.weight" : tensor<14336x4096xbf16>
// CHECK:       llm.attention {{.*}} layer 31 num_heads 32 num_kv_heads 8 head_dim 128
// CHECK-NOT:   llm.attention
// CHECK:       llm.weight "lm_head.weight" : tensor<128256x4096xbf16>

// 9 weights per layer x 32 + embedding, final norm and lm_head.
// WEIGHTS-COUNT-291: llm.weight
// WEIGHTS-NOT:       llm.weight
