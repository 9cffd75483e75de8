#!/usr/bin/env bash
# The main job: set up and build llmc (scripts/setup.sh), compile the bundled
# default model into an engine plan, and generate text with it.
#
# The default model is stories260K (assets/stories260k: Karpathy's tinyllamas,
# MIT), a real 260K-parameter Llama trained on children's stories, so the
# text it prints is a little story.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${LLMC_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh"

PLAN="$BUILD_DIR/stories260k.plan"
echo
echo "== llmc build assets/stories260k -o $PLAN"
"$BUILD_DIR/tools/llmc" build "$ROOT/assets/stories260k" -o "$PLAN"
echo
echo "== llmrun inspect $PLAN"
"$BUILD_DIR/tools/llmrun" inspect "$PLAN"
echo
echo "== llmrun $PLAN -p \"Once upon a time\" -n 200 --temperature 0.8 --top-p 0.95 --seed 1"
"$BUILD_DIR/tools/llmrun" "$PLAN" -p "Once upon a time" -n 200 --temperature 0.8 --top-p 0.95 --seed 1
cat <<EOT

That was stories260K, a 260K-parameter model: small enough to ship, real
enough to tell a story. To run your own model, point llmc at a Hugging Face
Llama, Mistral or Qwen2 directory:

  $BUILD_DIR/tools/llmc build path/to/hf-model-dir -o model.plan
  $BUILD_DIR/tools/llmrun model.plan -p "Once upon a time" -n 128

Benchmark plans with generated weights at real shapes: scripts/bench-models.
Embedding llmc in your program: docs/c-api.md.
EOT
