#!/usr/bin/env bash
# Installs every missing Debian package llmc needs (a no-op when all are
# present), then configures and builds llmc in build/ (or $LLMC_BUILD_DIR).
#
# Environment:
#   LLMC_BUILD_DIR   build folder (default: <repo>/build)
#   LLMC_CMAKE_ARGS  extra CMake arguments, e.g. "-DLLMC_SANITIZE=address,undefined"
#   LLMC_JOBS        parallel build jobs (default: number of cores)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${LLMC_BUILD_DIR:-$ROOT/build}"
JOBS="${LLMC_JOBS:-$(nproc)}"

PACKAGES=(
  cmake ninja-build g++ clang libclang-rt-14-dev python3 python3-venv pkg-config
  libgtest-dev libcli11-dev nlohmann-json3-dev libpcre2-dev libutf8proc-dev
  libflatbuffers-dev flatbuffers-compiler libcpp-httplib-dev
  libxxhash-dev
  libedit-dev
  libssl-dev
  g++-aarch64-linux-gnu qemu-user
  libmlir-16-dev mlir-16-tools llvm-16-dev llvm-16-tools
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]})); then
  echo "llmc setup: installing ${missing[*]}"
  SUDO=""
  if [[ "$(id -u)" -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
  $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
else
  echo "llmc setup: all ${#PACKAGES[@]} Debian packages present"
fi

if [[ ! -x /usr/local/cuda/bin/nvcc && -z "$(command -v nvcc || true)" ]]; then
  echo "llmc setup: CUDA toolkit not found; building without CUDA codegen (CPU targets only)"
fi

# clang builds everything (and the libFuzzer targets); g++ works too.
compilers=()
if command -v clang++ >/dev/null; then
  compilers=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
fi

if [[ -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  # Already configured: re-run to pick up new files; keep the chosen compilers.
  cmake -S "$ROOT" -B "$BUILD_DIR" ${LLMC_CMAKE_ARGS:-} >/dev/null
else
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${compilers[@]}" \
    ${LLMC_CMAKE_ARGS:-}
fi
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "llmc setup: built in $BUILD_DIR"
