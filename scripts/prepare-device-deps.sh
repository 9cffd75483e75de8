#!/usr/bin/env bash
# Fills .deps/ (ignored by git) with what scripts/device-check.sh needs on a
# GPU machine that has nvcc, g++, CMake and ninja but none of our Debian
# packages and no network, then builds the plans it benchmarks:
#   .deps/include   nlohmann/json, CLI11, flatbuffers, pcre2, utf8proc, GoogleTest headers,
#                   and schema/engine_generated.h (the machine has no flatc)
#   .deps/lib       libpcre2-8.a, libutf8proc.a, libgtest.a, libgtest_main.a (static: nothing
#                   to find at run time)
#   .deps/share     nlohmann_json's CMake package
#   .deps/plans     stories260k-f32.plan (real weights, fused and -O0), stories260k-q4.plan
#                   (int4 RTN, groups of 32), llama3-8b-shape-bf16.plan and
#                   llama3-8b-shape-q4.plan (synthetic weights; int4 groups of 128, the AWQ
#                   layout, generated on the GPU at load), every target
#   .deps/shared    the stories260K golden ids, for the gpu tests
# Run from anywhere on the development machine; needs a configured
# compiler build (BUILD_DIR, default build-cuda) with the CUDA toolkit.
# Everything in .deps stays under the device tool's 64 MiB carry limit.
# Check it is complete here: DEVICE_CHECK_CMAKE_ARGS=-DCMAKE_IGNORE_PREFIX_PATH=/usr
# scripts/device-check.sh (builds without the system packages; the GPU steps skip).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-cuda}
SHARED=${LLMC_SHARED_DIR:-$ROOT/../shared}
DEPS=$ROOT/.deps
JOBS=${JOBS:-2}

say() { echo "prepare-device-deps: $*"; }

say "building llmc in $BUILD_DIR"
ninja -C "$BUILD_DIR" -j"$JOBS" llmc >/dev/null

rm -rf "$DEPS"
mkdir -p "$DEPS/include/schema" "$DEPS/lib" "$DEPS/share/cmake" "$DEPS/plans" \
         "$DEPS/shared/golden"

say "headers and static libraries"
cp -r /usr/include/nlohmann /usr/include/CLI /usr/include/flatbuffers /usr/include/gtest \
      "$DEPS/include/"
cp /usr/include/pcre2.h /usr/include/utf8proc.h "$DEPS/include/"
cp "$BUILD_DIR/runtime/generated/schema/engine_generated.h" "$DEPS/include/schema/"
ARCH_LIB=/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
cp "$ARCH_LIB/libpcre2-8.a" "$ARCH_LIB/libutf8proc.a" "$ARCH_LIB/libgtest.a" \
   "$ARCH_LIB/libgtest_main.a" "$DEPS/lib/"
cp -r /usr/share/cmake/nlohmann_json "$DEPS/share/cmake/"

say "plans"
LLMC=$BUILD_DIR/tools/llmc
TARGETS=cpu,sm_90a,ptx
"$LLMC" build "$SHARED/models/stories260k" -o "$DEPS/plans/stories260k-f32.plan" \
  --target "$TARGETS" 2>&1 | tail -1
"$LLMC" build "$SHARED/models/stories260k" -o "$DEPS/plans/stories260k-f32-O0.plan" \
  --target "$TARGETS" -O0 2>&1 | tail -1
"$LLMC" build "$SHARED/models/stories260k" -o "$DEPS/plans/stories260k-q4.plan" \
  --target "$TARGETS" --quantize rtn --group-size 32 2>&1 | tail -1
MODEL=$(mktemp -d)
trap 'rm -rf "$MODEL"' EXIT
cat >"$MODEL/config.json" <<'EOF'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama",
 "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
 "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 8192,
 "rms_norm_eps": 1e-05, "vocab_size": 128256, "bos_token_id": 1, "eos_token_id": 2,
 "hidden_act": "silu", "rope_theta": 500000.0,
 "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 8192, "rope_type": "llama3"},
 "tie_word_embeddings": false, "torch_dtype": "bfloat16"}
EOF
cp "$SHARED/models/stories260k/tokenizer.json" "$MODEL/"
"$LLMC" build "$MODEL" -o "$DEPS/plans/llama3-8b-shape-bf16.plan" --dtype bf16 \
  --synthetic-weights --target "$TARGETS" 2>&1 | tail -1
"$LLMC" build "$MODEL" -o "$DEPS/plans/llama3-8b-shape-q4.plan" --dtype bf16 \
  --synthetic-weights --quantize rtn --group-size 128 --target "$TARGETS" 2>&1 | tail -1

cp "$SHARED/golden/stories260k_greedy.json" "$DEPS/shared/golden/"
say "done: $(du -sh "$DEPS" | cut -f1) in .deps (carry it: the device tool's carry [\".deps\"])"
