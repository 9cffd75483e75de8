# Sourced by the scripts that run llmc beside llama.cpp (bench-vs-llamacpp.sh,
# quant-vs-llamacpp.sh): finds the llama.cpp build, its converter and llmc's
# binaries, or stops with an error naming what is missing and how to get it.
#
#   llamacpp_setup ROOT LLAMA_CPP_BUILD_DIR TOOL...
# sets CONVERT (convert_hf_to_gguf.py), PYTHON, LLMC and LLMRUN; each TOOL must
# be an executable under LLAMA_CPP_BUILD_DIR/bin. The caller defines die().
llamacpp_setup() {
  local root="$1" build="$2" tool src
  shift 2
  [[ -n $build ]] || die "no llama.cpp build: pass its build directory or set LLAMA_CPP_BUILD"
  for tool in "$@"; do
    [[ -x $build/bin/$tool ]] || die "$build/bin/$tool not found: build it (cmake --build $build --target $tool)"
  done
  src="${LLAMA_CPP_SRC:-$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)}"
  CONVERT="$src/convert_hf_to_gguf.py"
  [[ -f $CONVERT ]] || die "$CONVERT not found: set LLAMA_CPP_SRC to llama.cpp's source tree"
  PYTHON="${PYTHON:-python3}"
  LLMC="${LLMC:-$root/build/tools/llmc}" LLMRUN="${LLMRUN:-$root/build/tools/llmrun}"
  [[ -x $LLMC && -x $LLMRUN ]] || die "$LLMC or $LLMRUN missing: build the llmc and llmrun targets"
}
