// RUN: rm -rf %t && mkdir -p %t/mistral %t/qwen2
// RUN: cp %S/Inputs/tokenizer.json %t/mistral/tokenizer.json
// RUN: cp %S/Inputs/tokenizer.json %t/qwen2/tokenizer.json
// RUN: echo '{"architectures": ["MistralForCausalLM"], "model_type": "mistral", \
// RUN:   "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, \
// RUN:   "num_attention_heads": 4, "num_key_value_heads": 1, "vocab_size": 128, \
// RUN:   "max_position_embeddings": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, \
// RUN:   "sliding_window": 16, "torch_dtype": "float32"}' > %t/mistral/config.json
// RUN: llmc build %t/mistral --synthetic-weights --emit mlir | FileCheck %s --check-prefix=MISTRAL
// RUN: echo '{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", \
// RUN:   "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3, \
// RUN:   "num_attention_heads": 4, "num_key_value_heads": 1, "vocab_size": 128, \
// RUN:   "max_position_embeddings": 256, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, \
// RUN:   "use_sliding_window": true, "sliding_window": 16, "max_window_layers": 1, \
// RUN:   "tie_word_embeddings": true, "torch_dtype": "float32"}' > %t/qwen2/config.json
// RUN: llmc build %t/qwen2 --synthetic-weights --emit mlir | FileCheck %s --check-prefix=QWEN2

// Mistral's sliding_window reaches every layer's attention.
// MISTRAL: llm.attention {{.*}} layer 0 {{.*}} causal window 16 :
// MISTRAL: llm.attention {{.*}} layer 1 {{.*}} causal window 16 :

// Qwen2 slides only the layers >= max_window_layers: layer 0 stays global.
// QWEN2:     llm.attention {{.*}} layer 0 {{.*}} causal :
// QWEN2:     llm.attention {{.*}} layer 1 {{.*}} causal window 16 :
// QWEN2:     llm.attention {{.*}} layer 2 {{.*}} causal window 16 :
