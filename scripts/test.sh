#!/usr/bin/env bash
# Sets up and builds llmc (scripts/setup.sh), then runs every test:
# unit, lit, golden (skipped without ../shared), fuzz (short runs), and gpu
# (skipped without a GPU). Extra arguments go to ctest, e.g. `-L unit`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${LLMC_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh"
cd "$BUILD_DIR"
ctest --output-on-failure -j "${LLMC_JOBS:-$(nproc)}" "$@"
