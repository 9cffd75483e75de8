#!/usr/bin/env bash
# Installs llmc into a scratch prefix and builds programs against the
# installed tree only, as an embedder would: the C example of docs/c-api.md
# (shared and static) and a C++ program through find_package(llmc), the C
# example again through pkg-config; each runs on the bundled stories260K
# plan and must print text. Also checks what the shared library exports.
# Usage: install_test.sh <build dir> <source dir>
set -euo pipefail
BUILD="$1"
SRC="$2"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
PREFIX="$WORK/prefix"

cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log"
for f in bin/llmrun include/llmc/llmc.h lib/libllmc.a lib/libllmc.so lib/libllmc.so.0 \
         lib/cmake/llmc/llmcConfig.cmake lib/cmake/llmc/llmcConfigVersion.cmake \
         lib/pkgconfig/llmc.pc; do
  [[ -e "$PREFIX/$f" ]] || { echo "FAIL: $f not installed"; exit 1; }
done

# Only the C API is exported, and nothing from MLIR, LLVM, NVRTC or libcuda is needed.
exported=$(nm -D --defined-only "$PREFIX/lib/libllmc.so" | awk '$2 ~ /[TDBR]/ {print $3}' | sed 's/@.*//')
bad=$(grep -v '^llmc_' <<<"$exported" || true)
[[ -z "$bad" ]] || { echo "FAIL: libllmc.so exports non-API symbols:"; echo "$bad" | head; exit 1; }
# Every function the header declares is exported (none declared and left undefined).
declared=$(grep -oE '^LLMC_API [^(]*[^a-z0-9_](llmc_[a-z0-9_]+)\(' "$PREFIX/include/llmc/llmc.h" |
           grep -oE 'llmc_[a-z0-9_]+\($' | tr -d '(')
[[ $(wc -l <<<"$declared") -ge 30 ]] || { echo "FAIL: too few declarations found: $declared"; exit 1; }
for fn in $declared; do
  grep -qx "$fn" <<<"$exported" || { echo "FAIL: $fn is declared in llmc.h but not exported"; exit 1; }
done
if readelf -d "$PREFIX/lib/libllmc.so" | grep -E 'NEEDED.*(MLIR|LLVM|nvrtc|libcuda)'; then
  echo "FAIL: libllmc.so depends on the compiler's or the GPU's libraries"; exit 1
fi
readelf -d "$PREFIX/lib/libllmc.so" | grep -q 'SONAME.*libllmc.so.0' || { echo "FAIL: SONAME"; exit 1; }

# The docs' example, extracted as it stands.
sed -n '/<!-- c-api-example:begin -->/,/<!-- c-api-example:end -->/p' "$SRC/docs/c-api.md" |
  sed '1,2d;$d' | sed '$d' >"$WORK/example.c"
grep -q 'llmc_generate' "$WORK/example.c" || { echo "FAIL: example not found in docs/c-api.md"; exit 1; }

PLAN="$WORK/stories.plan"
if [[ -x "$BUILD/tools/llmc" ]]; then
  "$BUILD/tools/llmc" build "$SRC/assets/stories260k" --target cpu -o "$PLAN" 2>"$WORK/build.log"
else
  echo "[  SKIPPED ] llmc (the compiler) is not built, so no plan to run the examples on"; exit 0
fi

check_run() { # name, command...
  local name="$1"; shift
  "$@" "$PLAN" >"$WORK/$name.out" 2>"$WORK/$name.err" || {
    echo "FAIL: $name exited $?"; cat "$WORK/$name.err"; exit 1; }
  grep -q 'Once upon a time' "$WORK/$name.out" || { echo "FAIL: $name printed no story"; cat "$WORK/$name.out"; exit 1; }
  echo "ok: $name: $(head -c 160 "$WORK/$name.out" | tr '\n' ' ')"
}

# find_package(llmc): shared, static, C++.
cmake -S "$SRC/tests/install/consumer" -B "$WORK/consumer" -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DEXAMPLE_C="$WORK/example.c" -DCMAKE_BUILD_TYPE=Release >"$WORK/consumer.log"
cmake --build "$WORK/consumer" >>"$WORK/consumer.log" 2>&1 || { cat "$WORK/consumer.log"; exit 1; }
check_run find_package_shared "$WORK/consumer/example_c"
check_run find_package_static "$WORK/consumer/example_c_static"
check_run find_package_cxx "$WORK/consumer/example_cxx"
if ldd "$WORK/consumer/example_c_static" | grep -q libllmc; then
  echo "FAIL: the static example still loads libllmc.so"; exit 1
fi

# pkg-config, with the C compiler alone.
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
pkg-config --exists llmc || { echo "FAIL: pkg-config does not find llmc"; exit 1; }
[[ "$(pkg-config --modversion llmc)" == "$(sed -n 's/^project(llmc VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")" ]] ||
  { echo "FAIL: llmc.pc version"; exit 1; }
# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -Werror "$WORK/example.c" $(pkg-config --cflags --libs llmc) \
  -Wl,-rpath,"$PREFIX/lib" -o "$WORK/pkgconfig_shared"
check_run pkgconfig_shared "$WORK/pkgconfig_shared"
# shellcheck disable=SC2046
cc -std=c99 -c "$WORK/example.c" $(pkg-config --cflags llmc) -o "$WORK/example.o"
# shellcheck disable=SC2046
cc "$WORK/example.o" "$PREFIX/lib/libllmc.a" $(pkg-config --static --libs-only-l llmc | sed 's/-lllmc//') \
  -o "$WORK/pkgconfig_static"
check_run pkgconfig_static "$WORK/pkgconfig_static"
echo "install test: all consumers built and ran"
