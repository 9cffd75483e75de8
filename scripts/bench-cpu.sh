#!/usr/bin/env bash
# CPU benchmarks of issue 4 (numbers go to docs/perf.md with the machine and
# date): stories260K (../shared, f32 and bf16) and the 110M synthetic Llama
# (f32 and bf16), prefill and decode at batch 1 and 8, peak RSS, and decode
# weight-read bandwidth as a fraction of this machine's.
# Usage: scripts/bench-cpu.sh [build dir] (default: build)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
SHARED="${LLMC_SHARED_DIR:-$ROOT/../shared}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
LLMC="$BUILD/tools/llmc"
LLMRUN="$BUILD/tools/llmrun"

plans=()
if [[ -d "$SHARED/models/stories260k" ]]; then
  for dtype in f32 bf16; do
    "$LLMC" build "$SHARED/models/stories260k" --dtype $dtype --target cpu -o "$WORK/stories260k-$dtype.plan" 2>/dev/null
    plans+=("stories260k-$dtype")
  done
fi
for dtype in f32 bf16; do
  "$LLMC" build "$ROOT/scripts/bench-models/llama-110m.json" --synthetic-weights --dtype $dtype \
    --target cpu -o "$WORK/llama110m-$dtype.plan" 2>/dev/null
  plans+=("llama110m-$dtype")
done

echo "date: $(date -u +%Y-%m-%d), cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), cores: $(nproc), load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-18s %5s %12s %12s %10s %8s %10s\n" plan batch prefill_tok/s decode_tok/s decode_GB/s %bw peak_MiB
for plan in "${plans[@]}"; do
  for batch in 1 8; do
    gen=32
    prompt=64
    json=$("$LLMRUN" bench "$WORK/$plan.plan" --prompt-len $prompt --gen-len $gen --batch $batch \
      --repeats 3 --json)
    python3 - "$plan" "$batch" "$json" <<'PY'
import json, sys
plan, batch, r = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
print("%-18s %5s %12.1f %12.1f %10.2f %7.0f%% %10.1f" % (
    plan, batch, r["prefill_tokens_per_second"], r["decode_tokens_per_second"],
    r["decode_weight_read_gb_per_second"], 100 * r["fraction_of_bandwidth"],
    r["peak_rss_bytes"] / 1048576))
PY
  done
done
