// RUN: rm -rf %t && mkdir -p %t
// RUN: cp %S/Inputs/tokenizer.json %t/tokenizer.json
// RUN: echo '{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", \
// RUN:   "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, \
// RUN:   "num_attention_heads": 4, "num_key_value_heads": 1, "vocab_size": 128, \
// RUN:   "max_position_embeddings": 256, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, \
// RUN:   "tie_word_embeddings": true, "bos_token_id": null, "eos_token_id": 2, \
// RUN:   "torch_dtype": "float32"}' > %t/config.json
// RUN: llmc build %t --synthetic-weights -o %t/fused.plan -v 2>&1 | FileCheck %s --check-prefix=FUSED
// RUN: llmc build %t --synthetic-weights -o %t/o0.plan -v -O0 2>&1 | FileCheck %s --check-prefix=O0
// RUN: llmc build %t --synthetic-weights -o %t/some.plan -v --no-fuse=rope,qkv 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SOME
// RUN: not llmc build %t --synthetic-weights -o %t/bad.plan --no-fuse=rope,bogus 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BOGUS
// RUN: not llmc build %t --synthetic-weights -o %t/bad.plan -O3 2>&1 | FileCheck %s --check-prefix=LEVEL

// Tests the driver's fuse stage on a 2-layer Qwen2 config (q/k/v biases):
// every fusion pass reports what it fused and the plan has 5 steps per
// layer plus the embedding and the LM head; -O0 runs none (16 steps per
// layer); --no-fuse skips the named ones; unknown names and levels fail.

// FUSED: fuse: llm-fuse-qkv: 2 q/k/v groups -> llm.fused_linear (6 llm.linear merged)
// FUSED: fuse: llm-fuse-swiglu: 2 gate/up pairs -> llm.fused_linear swiglu (8 ops merged)
// FUSED: fuse: llm-fuse-head: final norm + logits + argmax -> llm.lm_head (1 function)
// FUSED: fuse: llm-fuse-norm: 4 RMSNorms -> prologue of 4 GEMMs
// FUSED: fuse: llm-fuse-residual: 4 residual adds -> GEMM epilogue (accumulate in place)
// FUSED: fuse: llm-fuse-rope: 2 attentions + 4 RoPEs -> llm.rope_attention
// FUSED: stage lower {{.*}} 12 steps per token

// O0: stage fuse {{.*}} disabled
// O0: fuse: skipped qkv, swiglu, head, norm, residual, rope (-O0 or --no-fuse)
// O0-NOT: llm-fuse-
// O0: stage lower {{.*}} 35 steps per token

// SOME: fuse: skipped qkv, rope (-O0 or --no-fuse)
// SOME-NOT: llm-fuse-qkv
// SOME: fuse: llm-fuse-swiglu: 2 gate/up pairs
// SOME-NOT: llm-fuse-rope
// SOME: stage lower {{.*}} 20 steps per token

// BOGUS: error: --no-fuse: unknown fusion 'bogus' (valid: qkv, swiglu, head, norm, residual, rope)
// LEVEL: error: -O3 is not supported (-O0: no fusion, -O1: the default)
