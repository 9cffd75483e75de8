#!/usr/bin/env bash
# The Python package as a user installs it: `pip install ./python` into a
# fresh venv (pip fetches the build backend, setuptools, from PyPI), then
# its unittest suite on the bundled stories260K plan through the built
# libllmc.so.
# Usage: python_test.sh <build dir> <source dir>
set -euo pipefail
BUILD="$1"
SRC="$2"
if ! command -v python3 >/dev/null; then
  echo "[  SKIPPED ] python3 not found"; exit 0
fi
if [[ ! -x "$BUILD/tools/llmc" ]]; then
  echo "[  SKIPPED ] llmc (the compiler) is not built, so no plan to test on"; exit 0
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$BUILD/tools/llmc" build "$SRC/assets/stories260k" --target cpu -o "$WORK/stories.plan" 2>"$WORK/build.log"
python3 -m venv --system-site-packages "$WORK/venv"
# A copy, so that the build leaves nothing in the checkout.
cp -r "$SRC/python" "$WORK/src"
"$WORK/venv/bin/pip" install --quiet --no-deps "$WORK/src" \
  >"$WORK/pip.log" 2>&1 || { cat "$WORK/pip.log"; exit 1; }
cd "$WORK"  # import the installed package, not the source folder
LLMC_LIBRARY="$BUILD/runtime/libllmc.so" LLMC_TEST_PLAN="$WORK/stories.plan" \
  "$WORK/venv/bin/python" -m unittest discover -s "$SRC/python/tests" -v 2>&1
