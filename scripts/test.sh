#!/usr/bin/env bash
# Sets up and builds llmc (scripts/setup.sh), then runs every test:
# unit, lit, golden (skipped without ../shared), fuzz (short runs), and gpu
# (skipped without a GPU). Then the sanitizer job: the runtime and its tests
# (-DLLMC_BUILD_COMPILER=OFF) built with ASan + UBSan in build-asan/, running
# its unit, golden and fuzz tests (docs/fuzzing.md, "The sanitizer job").
# Extra arguments go to both ctest runs, e.g. `-L unit`.
#
# Environment:
#   LLMC_SANITIZER_JOB=0   skip the sanitizer job
#   LLMC_ASAN_BUILD_DIR    its build folder (default: <repo>/build-asan)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${LLMC_BUILD_DIR:-$ROOT/build}"
JOBS="${LLMC_JOBS:-$(nproc)}"
"$ROOT/scripts/setup.sh"
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$JOBS" "$@")

if [[ "${LLMC_SANITIZER_JOB:-1}" == 0 ]]; then
  exit 0
fi
if ! command -v clang++ >/dev/null; then
  echo "llmc test: no clang++; skipping the sanitizer job"
  exit 0
fi
ASAN_DIR="${LLMC_ASAN_BUILD_DIR:-$ROOT/build-asan}"
start=$(date +%s)
LLMC_BUILD_DIR="$ASAN_DIR" \
  LLMC_CMAKE_ARGS="-DLLMC_BUILD_COMPILER=OFF -DLLMC_SANITIZE=address,undefined" \
  "$ROOT/scripts/setup.sh"
# UBSan reports are failures (halt_on_error), not lines in a passing log.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$ROOT/tests/common/lsan_suppressions.txt}"
(cd "$ASAN_DIR" && ctest --output-on-failure -j "$JOBS" -L 'unit|golden|fuzz' "$@")
echo "llmc test: sanitizer job (ASan + UBSan, runtime only) took $(( $(date +%s) - start )) s"
