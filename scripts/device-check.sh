#!/usr/bin/env bash
# The GPU check, in one run on a machine with an NVIDIA GPU (no network, none
# of our Debian packages): runs the CUDA tests and benchmarks the carried
# plans, and prints a short table last. Everything comes from the carried
# .deps/ (scripts/prepare-device-deps.sh): prebuilt binaries (static
# libstdc++), a warm NVRTC kernel cache for cuda_kernels_gpu_test, the plans.
# Only when the prebuilt binaries do not start there does it build the
# runtime (-DLLMC_BUILD_COMPILER=OFF; needs cmake, ninja and g++).
# Target: under 4 minutes of device time (tests ~1.5 min, benchmarks ~2 min).
#
#   scripts/device-check.sh [OUT_DIR]    # OUT_DIR gets the logs (default: $OUT when set, as
#                                        # on the device tool's machine, else build-device)
# Without a GPU (a dry run here) it checks the preflight, that the carried
# binaries start and that the unit tests pass, skips the GPU steps and says so.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-device
OUT=${1:-${OUT:-$BUILD}}
DEPS=$ROOT/.deps
PLANS=$DEPS/plans
NEED_DRIVER=13000 # the cubins (CUDA 13.0), the PTX ISA 9.0 and libcublasLt.so.13
START=$(date +%s)
mkdir -p "$OUT"
elapsed() { echo $(($(date +%s) - START)); }
say() { echo "device-check [$(elapsed)s]: $*"; }
fail() { echo "device-check: preflight: $*" >&2; exit 2; }

# --- Preflight: each problem in one line. ---
[ -f "$DEPS/include/schema/engine_generated.h" ] ||
  fail ".deps/ is missing: run scripts/prepare-device-deps.sh first and carry .deps"
GPU=yes
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  GPU=no
else
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  # The CUDA version the driver supports, as cuDriverGetVersion reports it.
  CUDA_DRIVER=$(nvidia-smi | grep -o "CUDA Version: [0-9]*\.[0-9]*" | grep -o "[0-9.]*$")
  if [ -n "$CUDA_DRIVER" ]; then
    D=$((${CUDA_DRIVER%.*} * 1000 + ${CUDA_DRIVER#*.} * 10))
    [ "$D" -ge "$NEED_DRIVER" ] || fail "the NVIDIA driver supports CUDA $CUDA_DRIVER; the plans'" \
      "sm_90a cubins (CUDA 13.0), PTX ISA 9.0 and libcublasLt.so.13 need 13.0 or newer"
  fi
fi
# The driver library may live outside the loader's path (a read-only mount).
if ! ldconfig -p 2>/dev/null | grep -q libcuda.so.1; then
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib64; do
    [ -e "$d/libcuda.so.1" ] && export LLMC_LIBCUDA=$d/libcuda.so.1 && break
  done
fi
# The toolkit's lib64: NVRTC and nvJitLink (cuda_kernels_gpu_test), cuBLASLt.
NVCC_DIR=$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")
for d in "$NVCC_DIR/../lib64" /usr/local/cuda/lib64 /usr/local/cuda/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=$(cd "$d" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
done
if ! ldconfig -p 2>/dev/null | grep -q libcublasLt.so.13; then
  for d in ${LD_LIBRARY_PATH//:/ }; do
    [ -e "$d/libcublasLt.so.13" ] && export LLMC_LIBCUBLASLT=$d/libcublasLt.so.13 && break
  done
fi

# --- The binaries: carried, else built here. ---
BIN=$DEPS/bin
if [ -x "$BIN/cuda_runtime_test" ] && "$BIN/cuda_runtime_test" --gtest_list_tests >/dev/null 2>&1 &&
   "$BIN/cuda_kernels_gpu_test" --gtest_list_tests >/dev/null 2>&1; then
  say "carried binaries start here (.deps/bin)"
else
  say "carried binaries missing or not starting here: building the runtime"
  MISSING=""
  for tool in cmake ninja g++; do command -v $tool >/dev/null 2>&1 || MISSING="$MISSING $tool"; done
  [ -z "$MISSING" ] || fail "the carried binaries do not run here and${MISSING} missing to build them"
  # DEVICE_CHECK_CMAKE_ARGS: extra arguments, e.g. -DCMAKE_IGNORE_PREFIX_PATH=/usr to check on
  # the development machine that .deps/ holds every dependency.
  # shellcheck disable=SC2086
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLMC_BUILD_COMPILER=OFF \
    -DLLMC_WITH_CUDA=ON ${DEVICE_CHECK_CMAKE_ARGS:-} >"$OUT/configure.log" 2>&1 ||
    { tail -30 "$OUT/configure.log"; exit 1; }
  ninja -C "$BUILD" -j"$(nproc)" llmrun cuda_runtime_test cuda_kernel_math_test \
    cuda_kernels_gpu_test cuda_e2e_gpu_test >"$OUT/build.log" 2>&1 ||
    { grep -E "error|FAILED" "$OUT/build.log" | head -30; exit 1; }
  BIN=$BUILD/bin
  mkdir -p "$BIN"
  for b in llmrun cuda_runtime_test cuda_kernel_math_test cuda_kernels_gpu_test cuda_e2e_gpu_test; do
    cp "$(find "$BUILD" -name "$b" -type f -perm -u+x | head -1)" "$BIN/"
  done
fi

say "tests"
export LLMC_TEST_PLAN_DIR=$PLANS LLMC_SHARED_DIR=$DEPS/shared
# A copy of the warm cache, outside OUT (whose files come back, 8 at most):
# what the tests compile anew stays out of .deps.
export LLMC_CACHE_DIR=$BUILD/kernel-cache
rm -rf "$LLMC_CACHE_DIR"
mkdir -p "$BUILD"
cp -r "$DEPS/kernel-cache" "$LLMC_CACHE_DIR" 2>/dev/null || mkdir -p "$LLMC_CACHE_DIR"
CACHED=$(find "$LLMC_CACHE_DIR" -type f | wc -l)
TESTS=ok
runTest() { # binary timeout [gtest args]
  echo "=== $1 ${*:3}" >>"$OUT/gpu-tests.log"
  timeout "$2" "$BIN/$1" "${@:3}" >>"$OUT/gpu-tests.log" 2>&1 || TESTS=FAILED
}
# The kernels of the LayerNorm / q-k-norm / GELU / RoPE-variant / logit
# scale families (docs/cuda.md) first, on their own: their result comes
# back even if a later step runs out of time.
FEATURES='*LayerNorm*:*GroupedRmsNorm*:*RopeStepVariants*:*RopeVariantsInAttention*:*LogitsScaleAndBias*:*ReluAndGated*:*FusedInt8Linears*'

: >"$OUT/gpu-tests.log"
runTest cuda_runtime_test 60
runTest cuda_kernel_math_test 60
if [ "$GPU" = yes ]; then
  runTest cuda_kernels_gpu_test 60 --gtest_filter="$FEATURES"
  runTest cuda_kernels_gpu_test 200 --gtest_filter="-$FEATURES"
  runTest cuda_e2e_gpu_test 120
  # A gpu test that skips here saw no usable GPU: that is a failure of this check.
  if [ "$TESTS" = ok ] && grep -q "\[  SKIPPED \]" "$OUT/gpu-tests.log"; then
    WHY=$(grep -m1 -o "no usable GPU.*" "$OUT/gpu-tests.log")
    TESTS="SKIPPED (${WHY:-see gpu-tests.log})"
  fi
else
  # Dry run: the GPU tests start and skip.
  runTest cuda_kernels_gpu_test 60
  runTest cuda_e2e_gpu_test 60
fi
grep -E "^=== |\[  (FAILED|PASSED) |tests? (passed|skipped)|max \|logit|cuBLASLt M=" \
  "$OUT/gpu-tests.log" | sort -u | head -60
say "kernel cache: $CACHED carried, $(($(find "$LLMC_CACHE_DIR" -type f | wc -l) - CACHED)) compiled here"
# The first failures in full, in case the logs do not come back.
[ "$TESTS" = ok ] || grep -E -A8 ": Failure$" "$OUT/gpu-tests.log" | head -120
LLMRUN=$BIN/llmrun

ROWS=()
bench() { # label plan batch prompt gen [llmrun flags]
  local label=$1 plan=$2 batch=$3 prompt=$4 gen=$5 json t0=$(date +%s)
  # Two repeats: the first decode captures the CUDA graphs; the median of two is their mean.
  # shellcheck disable=SC2086
  json=$(timeout 120 "$LLMRUN" bench "$plan" --device cuda --batch "$batch" --prompt-len "$prompt" \
         --gen-len "$gen" --repeats 2 --no-verify --json ${6:-} 2>>"$OUT/bench.log")
  if [ -z "$json" ]; then
    ROWS+=("$label|$batch|$prompt|failed (see bench.log)")
    return
  fi
  echo "$label $json" >>"$OUT/bench.log"
  ROWS+=("$label|$batch|$prompt|$(python3 -c '
import json, sys
j = json.loads(sys.argv[1])
frac = j.get("fraction_of_bandwidth", 0)
print("%.0f|%.1f|%.0f|%.0f%%|%s" % (j["prefill_tokens_per_second"], j["decode_tokens_per_second"],
                                    j["decode_weight_read_gb_per_second"], 100 * frac,
                                    sys.argv[2]))' "$json" "$(($(date +%s) - t0))")")
}
if [ "$GPU" = yes ]; then
  say "benchmarks"
  "$LLMRUN" "$PLANS/stories260k-f32.plan" -p "Once upon a time" -n 40 --device cuda \
    >"$OUT/generate.txt" 2>&1 || say "generate failed (see generate.txt)"
  bench "stories260k f32" "$PLANS/stories260k-f32.plan" 1 64 128
  L8B=$PLANS/llama3-8b-shape-bf16.plan
  for b in 1 8 32 64; do
    bench "llama3-8b-shape bf16" "$L8B" "$b" 128 64
  done
  bench "8b bf16 ctx 4096" "$L8B" 1 4096 64
  bench "llama3-8b-shape bf16" "$L8B" 1 2048 1
  bench "8b bf16 no-cublaslt" "$L8B" 1 2048 1 --no-cublaslt # our GEMM kernels only
  bench "8b bf16 max_seq 131072" "$PLANS/llama3-8b-shape-bf16-131k.plan" 1 128 64
  Q8B=$PLANS/llama3-8b-shape-q4.plan
  for b in 1 8 32 64; do
    bench "llama3-8b-shape int4" "$Q8B" "$b" 128 64
  done
  bench "llama3-8b-shape int4" "$Q8B" 1 2048 1
else
  say "no GPU here (nvidia-smi finds none): GPU tests skipped, benchmarks skipped"
  TESTS="$TESTS (dry run: no GPU)"
fi

say "done in $(elapsed) s; logs in $OUT"
echo
echo "device-check: tests $TESTS"
[ "$GPU" = yes ] && echo "device-check: $(grep -m1 -oE \
  '(plain bf16 GEMMs on cuBLASLt|cuBLASLt not used|cuBLASLt turned off)[^;]*' \
  "$OUT/bench.log" || echo "no cuBLASLt line in bench.log")"
printf "%-24s %6s %7s %12s %12s %10s %8s %6s\n" plan batch prompt "prefill t/s" "decode t/s" \
  "GB/s" "of copy" "wall s"
for r in "${ROWS[@]}"; do
  IFS='|' read -r label batch prompt pre dec gbs frac wall <<<"$r"
  printf "%-24s %6s %7s %12s %12s %10s %8s %6s\n" "$label" "$batch" "$prompt" "$pre" "${dec:-}" \
    "${gbs:-}" "${frac:-}" "${wall:-}"
done
[ "${TESTS%% *}" = ok ]
