#!/usr/bin/env bash
# The main job: set up and build llmc (scripts/setup.sh), compile the bundled
# default model into an engine plan, and generate text with it.
#
# The default model (scripts/default-model) is a tiny Llama whose weights are
# synthetic (no trained weights ship with llmc), so its text is noise; the
# output shows how to run a real model.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${LLMC_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh"

PLAN="$BUILD_DIR/default.plan"
echo
echo "== llmc build scripts/default-model/model.json --synthetic-weights -o $PLAN"
"$BUILD_DIR/tools/llmc" build "$ROOT/scripts/default-model/model.json" --synthetic-weights \
  -o "$PLAN"
echo
echo "== llmrun inspect $PLAN"
"$BUILD_DIR/tools/llmrun" inspect "$PLAN"
echo
echo "== llmrun $PLAN -p \"Once upon a time\" -n 48 --temperature 0.8 --seed 1"
"$BUILD_DIR/tools/llmrun" "$PLAN" -p "Once upon a time" -n 48 --temperature 0.8 --seed 1
cat <<EOT

The default model has synthetic weights, so the text above is noise. To run a
real model, point llmc at a Hugging Face Llama, Mistral or Qwen2 directory:

  $BUILD_DIR/tools/llmc build path/to/hf-model-dir -o model.plan
  $BUILD_DIR/tools/llmrun model.plan -p "Once upon a time" -n 128

e.g. the stories260K model of the llmc development checkout:
  $BUILD_DIR/tools/llmc build ../shared/models/stories260k -o stories.plan
EOT
