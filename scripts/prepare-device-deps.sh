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
#                   llama3-8b-shape-bf16-131k.plan (max_seq_len 131072: the long-context
#                   KV cache and split lengths)
#   .deps/shared    the stories260K golden ids, for the gpu tests
#   .deps/bin       prebuilt llmrun and the CUDA test binaries (runtime only, libstdc++,
#                   libgcc, pcre2 and utf8proc linked statically, stripped), so the GPU
#                   machine spends its minutes on tests and benchmarks, not compiling
#   .deps/kernel-cache  the NVRTC results of every kernel cuda_kernels_gpu_test compiles,
#                   made here by running it against the fake libcuda (its checks fail
#                   there; only the compiles matter): on the device they load from cache
# Run from anywhere on the development machine; needs a configured
# compiler build (BUILD_DIR, default build-cuda) with the CUDA toolkit and
# its fake libcuda (tests/cuda), and clang (the carried binaries are built in
# build-carry).
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

say "building llmc and the fake libcuda in $BUILD_DIR"
ninja -C "$BUILD_DIR" -j"$JOBS" llmc llmc_fake_libcuda llmc_fake_libcublaslt >/dev/null

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

sed 's/"max_position_embeddings": 8192/"max_position_embeddings": 131072/' \
  "$MODEL/config.json" >"$MODEL/config.131k" && mv "$MODEL/config.131k" "$MODEL/config.json"
"$LLMC" build "$MODEL" -o "$DEPS/plans/llama3-8b-shape-bf16-131k.plan" --dtype bf16 \
  --synthetic-weights --target "$TARGETS" 2>&1 | tail -1

cp "$SHARED/golden/stories260k_greedy.json" "$DEPS/shared/golden/"

# The binaries the device runs, built as it would build them (runtime only).
CARRY=$ROOT/build-carry
CARRIED="llmrun cuda_runtime_test cuda_kernel_math_test cuda_kernels_gpu_test cuda_e2e_gpu_test"
say "binaries (runtime only, static libstdc++) in $CARRY"
if [ ! -f "$CARRY/build.ninja" ]; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(dirname "$ROOT")}
  cmake -S "$ROOT" -B "$CARRY" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLMC_BUILD_COMPILER=OFF \
    -DLLMC_WITH_CUDA=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc -s" \
    -DPCRE2_LIBRARY="$ARCH_LIB/libpcre2-8.a" -DUTF8PROC_LIBRARY="$ARCH_LIB/libutf8proc.a" \
    >/dev/null
fi
# shellcheck disable=SC2086
nice ninja -C "$CARRY" -j"$JOBS" $CARRIED >/dev/null
mkdir -p "$DEPS/bin"
for b in $CARRIED; do
  f=$(find "$CARRY" -name "$b" -type f -perm -u+x | head -1)
  cp "$f" "$DEPS/bin/"
  if ldd "$f" | grep -qE "libstdc\+\+|libpcre2|libutf8proc"; then
    echo "prepare-device-deps: $b still needs a shared library the device may lack:" >&2
    ldd "$f" >&2
    exit 1
  fi
done

say "warm NVRTC kernel cache (cuda_kernels_gpu_test against the fake libcuda)"
mkdir -p "$DEPS/kernel-cache"
START=$(date +%s)
LLMC_CACHE_DIR=$DEPS/kernel-cache LLMC_LIBCUDA=$BUILD_DIR/tests/cuda/libllmc_fake_libcuda.so \
  LLMC_LIBCUBLASLT=$BUILD_DIR/tests/cuda/libllmc_fake_libcublaslt.so \
  timeout 1800 "$DEPS/bin/cuda_kernels_gpu_test" >"$DEPS/kernel-cache.log" 2>&1 || true
say "$(find "$DEPS/kernel-cache" -type f | wc -l) cached kernel files in $(($(date +%s) - START)) s"
say "done: $(du -sh "$DEPS" | cut -f1) in .deps (carry it: the device tool's carry [\".deps\"])"
