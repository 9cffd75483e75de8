#!/usr/bin/env bash
# The NEON path's tests on a machine that is not AArch64 (docs/perf.md, "CPU
# NEON path"): cross-builds the CPU kernels and their tests (tests/neon/cross,
# cmake/aarch64-linux-gnu.cmake) and runs every test binary under qemu-user
# twice: `-cpu max` (NEON + dotprod: the SDOT int4 kernel) and `-cpu
# cortex-a53` (NEON without dotprod: the widening fallback).
# Usage: scripts/test-neon.sh [BUILD_DIR]   (default <repo>/build-neon)
# Exits 77 (ctest's skip code for the `neon` test) when the cross compiler,
# qemu or the GoogleTest sources are missing.
# Environment: LLMC_JOBS (build jobs, default nproc).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build-neon}"
JOBS="${LLMC_JOBS:-$(nproc)}"
SYSROOT=/usr/aarch64-linux-gnu
TESTS=(cpu_neon_test cpu_kernels_test cpu_gemm_test cpu_fused_test cpu_layer_norm_test
       cpu_matmul_q4_test cpu_matmul_q8_test)

missing=()
command -v aarch64-linux-gnu-g++ >/dev/null || missing+=("aarch64-linux-gnu-g++ (g++-aarch64-linux-gnu)")
command -v qemu-aarch64 >/dev/null || missing+=("qemu-aarch64 (qemu-user)")
[[ -f /usr/src/googletest/CMakeLists.txt ]] || missing+=("/usr/src/googletest (googletest)")
if ((${#missing[@]})); then
  echo "llmc test-neon: skipped: missing ${missing[*]};" \
       "install with: apt-get install g++-aarch64-linux-gnu qemu-user googletest"
  exit 77
fi

start=$(date +%s)
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
launcher=()
command -v ccache >/dev/null &&
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$ROOT/tests/neon/cross" -B "$BUILD" "${generator[@]}" "${launcher[@]}" \
  -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/aarch64-linux-gnu.cmake" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j "$JOBS" -- "${TESTS[@]}" >"$BUILD/build.log" 2>&1 || {
  tail -n 40 "$BUILD/build.log"
  echo "llmc test-neon: FAILED: the AArch64 build (log: $BUILD/build.log)"
  exit 1
}
built=$(date +%s)

# SDOT must appear only in the file that runs where the CPU has dotprod, and
# that file must share no inline (weak) code with the rest, which could
# otherwise link its Armv8.2 copy into the paths every CPU runs.
dot_object=$(find "$BUILD" -name 'matmul_q4_neon_dot.cpp.o' | head -n 1)
if [[ -z $dot_object ]]; then
  echo "llmc test-neon: FAILED: no matmul_q4_neon_dot.cpp.o under $BUILD"
  exit 1
fi
weak=$(aarch64-linux-gnu-nm -C "$dot_object" | grep -E ' [WwVv] ' || true)
if [[ -n $weak ]]; then
  printf '%s\n' "$weak"
  echo "llmc test-neon: FAILED: matmul_q4_neon_dot.cpp defines weak symbols (above)"
  exit 1
fi
while IFS= read -r object; do
  if [[ $object != "$dot_object" ]] && aarch64-linux-gnu-objdump -d "$object" | grep -q $'\tsdot'; then
    echo "llmc test-neon: FAILED: $object has SDOT instructions outside the dotprod kernel"
    exit 1
  fi
done < <(find "$BUILD/CMakeFiles/llmc_cpu.dir" -name '*.o')

# One CPU model's runs; prints a line per binary, and FAILED lines for
# failures. cpu_neon_test must report what the kernels saw there.
run_model() {
  local cpu=$1 dotprod=$2 test log
  for test in "${TESTS[@]}"; do
    log="$BUILD/$test.$cpu.log"
    if ! qemu-aarch64 -L "$SYSROOT" -cpu "$cpu" "$BUILD/$test" --gtest_brief=1 >"$log" 2>&1; then
      cat "$log"
      echo "FAILED: $test on qemu -cpu $cpu"
      continue
    fi
    if [[ $test == cpu_neon_test ]] && ! grep -q "isa: neon, neon dotprod: $dotprod" "$log"; then
      cat "$log"
      echo "FAILED: $test on qemu -cpu $cpu: expected 'isa: neon, neon dotprod: $dotprod'"
      continue
    fi
    echo "llmc test-neon: $test passed on qemu -cpu $cpu ($(grep -c '^\[  SKIPPED \]' "$log" || true) skips)"
  done
}

# The two models side by side (qemu-user runs a test binary on about one core).
run_model max yes >"$BUILD/max.out" 2>&1 &
with=$!
run_model cortex-a53 no >"$BUILD/cortex-a53.out" 2>&1 &
without=$!
wait "$with" "$without"
cat "$BUILD/max.out" "$BUILD/cortex-a53.out"
mapfile -t failed < <(grep -h '^FAILED: ' "$BUILD/max.out" "$BUILD/cortex-a53.out" || true)

end=$(date +%s)
echo "llmc test-neon: build $((built - start)) s, tests $((end - built)) s under qemu"
if ((${#failed[@]})); then
  printf 'llmc test-neon: %s\n' "${failed[@]}"
  exit 1
fi
echo "llmc test-neon: all ${#TESTS[@]} test binaries passed on both CPU models"
