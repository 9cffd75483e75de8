#!/usr/bin/env bash
# The GPU check, in one run on a machine with an NVIDIA GPU, nvcc, g++,
# CMake and ninja (no network, none of our Debian packages): builds the
# runtime with -DLLMC_BUILD_COMPILER=OFF from the carried .deps/ (made by
# scripts/prepare-device-deps.sh), runs the tests labelled gpu, benchmarks
# the carried plans, and prints a short table last. Budget: under 8 minutes
# on an H200 (build ~2 min, tests ~1 min, benchmarks ~3 min).
#
#   scripts/device-check.sh [OUT_DIR]    # OUT_DIR gets the logs (default: $OUT when set, as
#                                        # on the device tool's machine, else build-device)
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-device
OUT=${1:-${OUT:-$BUILD}}
DEPS=$ROOT/.deps
PLANS=$DEPS/plans
START=$(date +%s)
mkdir -p "$OUT"
elapsed() { echo $(($(date +%s) - START)); }
say() { echo "device-check [$(elapsed)s]: $*"; }

if [ ! -f "$DEPS/include/schema/engine_generated.h" ]; then
  echo "device-check: .deps/ is missing: run scripts/prepare-device-deps.sh first and carry .deps" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null ||
  say "nvidia-smi not found"
nvcc --version 2>/dev/null | tail -1
# The driver library may live outside the loader's path (a read-only mount).
if ! ldconfig -p 2>/dev/null | grep -q libcuda.so.1; then
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib64; do
    [ -e "$d/libcuda.so.1" ] && export LLMC_LIBCUDA=$d/libcuda.so.1 && break
  done
fi
# So may cuBLASLt (the toolkit's lib64): prefill GEMMs use it when it loads.
if ! ldconfig -p 2>/dev/null | grep -q libcublasLt.so.13; then
  NVCC_DIR=$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")
  for d in "$NVCC_DIR/../lib64" /usr/local/cuda/lib64; do
    [ -e "$d/libcublasLt.so.13" ] && export LLMC_LIBCUBLASLT=$d/libcublasLt.so.13 && break
  done
fi

say "configure + build (runtime only, CUDA tests)"
# DEVICE_CHECK_CMAKE_ARGS: extra arguments, e.g. -DCMAKE_IGNORE_PREFIX_PATH=/usr to check on
# the development machine that .deps/ holds every dependency.
# shellcheck disable=SC2086
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLMC_BUILD_COMPILER=OFF \
  -DLLMC_WITH_CUDA=ON ${DEVICE_CHECK_CMAKE_ARGS:-} >"$OUT/configure.log" 2>&1 ||
  { tail -30 "$OUT/configure.log"; exit 1; }
ninja -C "$BUILD" -j"$(nproc)" llmrun cuda_runtime_test cuda_kernels_gpu_test cuda_e2e_gpu_test \
  >"$OUT/build.log" 2>&1 || { grep -E "error|FAILED" "$OUT/build.log" | head -30; exit 1; }

say "tests (label gpu, and the CUDA runtime unit test)"
export LLMC_TEST_PLAN_DIR=$PLANS LLMC_SHARED_DIR=$DEPS/shared LLMC_CACHE_DIR=$BUILD/kernel-cache
TESTS=ok
# -V: the log keeps every test's output (max |logit| lines, cuBLASLt outcomes), not only failures'.
timeout 300 ctest --test-dir "$BUILD" -L gpu -R cuda_ -V --timeout 240 \
  >"$OUT/gpu-tests.log" 2>&1 || TESTS=FAILED
timeout 60 "$BUILD/tests/cuda/cuda_runtime_test" >>"$OUT/gpu-tests.log" 2>&1 || TESTS=FAILED
# A gpu test that skips here saw no usable GPU: that is a failure of this check.
if [ "$TESTS" = ok ] && grep -q "(Skipped)" "$OUT/gpu-tests.log"; then
  WHY=$("$BUILD/tests/cuda/cuda_kernels_gpu_test" --gtest_filter='*Embedding*' 2>&1 |
        grep -m1 -o "no usable GPU.*")
  TESTS="SKIPPED (${WHY:-see gpu-tests.log})"
fi
grep -E "\[  (FAILED|SKIPPED|PASSED) |tests passed|max \|logit|cuBLASLt M=" "$OUT/gpu-tests.log" |
  sort -u
# The first failures in full, in case the logs do not come back.
[ "$TESTS" = ok ] || grep -E -A8 ": Failure$" "$OUT/gpu-tests.log" | head -120
LLMRUN=$BUILD/tools/llmrun

say "benchmarks"
ROWS=()
bench() { # label plan batch prompt gen [llmrun flags]
  local label=$1 plan=$2 batch=$3 prompt=$4 gen=$5 json
  # shellcheck disable=SC2086
  json=$(timeout 150 "$LLMRUN" bench "$plan" --device cuda --batch "$batch" --prompt-len "$prompt" \
         --gen-len "$gen" --repeats 1 --json ${6:-} 2>>"$OUT/bench.log")
  if [ -z "$json" ]; then
    ROWS+=("$label|$batch|$prompt|failed (see bench.log)")
    return
  fi
  echo "$label $json" >>"$OUT/bench.log"
  ROWS+=("$label|$batch|$prompt|$(python3 -c '
import json, sys
j = json.loads(sys.argv[1])
bw = j.get("machine_read_gb_per_second", 0)
frac = j.get("fraction_of_bandwidth", 0)
print("%.0f|%.1f|%.0f|%.0f%%" % (j["prefill_tokens_per_second"], j["decode_tokens_per_second"],
                                 j["decode_weight_read_gb_per_second"], 100 * frac))' "$json")")
}
"$LLMRUN" "$PLANS/stories260k-f32.plan" -p "Once upon a time" -n 40 --device cuda \
  >"$OUT/generate.txt" 2>&1 || say "generate failed (see generate.txt)"
bench "stories260k f32" "$PLANS/stories260k-f32.plan" 1 64 128
L8B=$PLANS/llama3-8b-shape-bf16.plan
for b in 1 8 32 64; do
  bench "llama3-8b-shape bf16" "$L8B" "$b" 128 64
done
bench "llama3-8b-shape bf16" "$L8B" 1 2048 1
bench "8b bf16 no-cublaslt" "$L8B" 1 2048 1 --no-cublaslt # our GEMM kernels only
Q8B=$PLANS/llama3-8b-shape-q4.plan
for b in 1 8; do
  bench "llama3-8b-shape int4" "$Q8B" "$b" 128 64
done
bench "llama3-8b-shape int4" "$Q8B" 1 2048 1

say "done in $(elapsed) s; logs in $OUT"
echo
echo "device-check: gpu tests $TESTS"
echo "device-check: $(grep -m1 -oE '(plain bf16 GEMMs on cuBLASLt|cuBLASLt not used)[^;]*' \
  "$OUT/bench.log" || echo "no cuBLASLt line in bench.log")"
printf "%-22s %6s %7s %12s %12s %10s %8s\n" plan batch prompt "prefill t/s" "decode t/s" "GB/s" "of copy"
for r in "${ROWS[@]}"; do
  IFS='|' read -r label batch prompt pre dec gbs frac <<<"$r"
  printf "%-22s %6s %7s %12s %12s %10s %8s\n" "$label" "$batch" "$prompt" "$pre" "${dec:-}" \
    "${gbs:-}" "${frac:-}"
done
[ "$TESTS" = ok ]
