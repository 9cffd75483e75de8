#!/usr/bin/env bash
# Before/after CPU benchmark of two llmrun binaries on the 110M synthetic
# Llama (f32, f16, bf16): prefill of a 512-token prompt (pp512) and decode of
# 32 tokens, at 1 and 2 threads, in alternating rounds (the order flips every
# round), medians per binary and the median of the per-round new/old ratios.
# The machine's read bandwidth comes from llmrun bench once per thread count.
# Usage: scripts/bench-cpu-ab.sh OLD_LLMRUN NEW_LLMRUN [rounds, default 3]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OLD="$1" NEW="$2" ROUNDS="${3:-3}"
LLMC="${LLMC:-$ROOT/build/tools/llmc}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
for dtype in f32 f16 bf16; do
  "$LLMC" build "$ROOT/scripts/bench-models/llama-110m.json" --synthetic-weights --dtype $dtype \
    --target cpu -o "$WORK/$dtype.plan" >/dev/null 2>&1
done
echo "date: $(date -u '+%Y-%m-%d %H:%M'), cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), cores: $(nproc), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
run() { # run BINARY DTYPE THREADS [extra]
  "$1" bench "$WORK/$2.plan" --prompt-len 512 --gen-len 32 --repeats 1 -t "$3" --json --no-verify "${@:4}"
}
for threads in 1 2; do
  echo "bandwidth $threads $(run "$NEW" f32 "$threads" | python3 -c 'import json,sys; print(json.load(sys.stdin)["machine_read_gb_per_second"])')" >>"$WORK/results"
done
for ((round = 0; round < ROUNDS; ++round)); do
  for dtype in f32 f16 bf16; do
    for threads in 1 2; do
      order=(old new)
      ((round % 2)) && order=(new old)
      for which in "${order[@]}"; do
        bin="$OLD"; [[ $which == new ]] && bin="$NEW"
        echo "$round $dtype $threads $which $(run "$bin" $dtype $threads --no-bandwidth | tr -d '\n')" >>"$WORK/results"
      done
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK/results" <<'PY'
import json, statistics, sys
rows, bw = {}, {}
for line in open(sys.argv[1]):
    parts = line.split(" ", 4)
    if parts[0] == "bandwidth":
        bw[int(parts[1])] = float(parts[2]); continue
    rnd, dtype, threads, which, js = parts
    rows.setdefault((dtype, int(threads)), {}).setdefault(int(rnd), {})[which] = json.loads(js)
print("%-5s %3s %9s %9s %6s %9s %9s %6s %8s" % ("dtype", "thr", "pp512 old", "new", "ratio",
      "tg32 old", "new", "ratio", "new %bw"))
for (dtype, threads), rounds in sorted(rows.items()):
    med = lambda which, key: statistics.median(r[which][key] for r in rounds.values())
    ratio = lambda key: statistics.median(r["new"][key] / r["old"][key] for r in rounds.values())
    gbs = statistics.median(r["new"]["decode_weight_read_gb_per_second"] for r in rounds.values())
    print("%-5s %3d %9.1f %9.1f %6.2f %9.1f %9.1f %6.2f %7.0f%%" % (dtype, threads,
          med("old", "prefill_tokens_per_second"), med("new", "prefill_tokens_per_second"),
          ratio("prefill_tokens_per_second"), med("old", "decode_tokens_per_second"),
          med("new", "decode_tokens_per_second"), ratio("decode_tokens_per_second"),
          100 * gbs / bw[threads]))
print("read bandwidth (llmrun bench, all threads summing 1 GiB): " +
      ", ".join("%d thr %.1f GB/s" % (t, b) for t, b in sorted(bw.items())))
PY
