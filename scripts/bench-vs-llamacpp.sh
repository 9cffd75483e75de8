#!/usr/bin/env bash
# llmc against llama.cpp on the CPU, side by side (issue 18; method in docs/perf.md,
# "Side by side with llama.cpp").
#
# The same random weights (std 0.02, scripts/make-random-hf-model.py) in Hugging
# Face layout go to both: llama.cpp's own convert_hf_to_gguf.py makes f32, f16 and
# bf16 GGUFs and llama-quantize a Q4_0 one; `llmc build` makes f32, f16 and bf16
# plans and int4 RTN plans (G = 32, 64) with `--dtype bf16` (embeddings, LM head).
# Then, per round, per model, dtype and thread count, llama-bench (pp512 and tg64)
# and `llmrun bench` (prefill of a 512-token prompt; 64 decode steps after a
# 1-token prompt, which is what tg64 times) run one after the other, the order
# flipping every round. Printed: llmc / llama.cpp ratios, each the median of the
# per-round ratios, the medians of both, decode GB/s of weights read against the
# machine's read bandwidth (`llmrun bench`'s probe, runtime/cpu/read_bandwidth.h:
# T threads reading a 1 GiB buffer in 4 prefetched AVX2 streams each, best of 5,
# before and after the rounds: "%bw" against the best of those; "%bw paired":
# each decode run against the better of the probes right before and after it,
# `llmrun bench --paired-bandwidth`, since this host's bandwidth moves between
# modes that last minutes) and the load average.
#
# Usage: scripts/bench-vs-llamacpp.sh [options] [LLAMA_CPP_BUILD_DIR]
#   LLAMA_CPP_BUILD_DIR (or $LLAMA_CPP_BUILD): a llama.cpp CMake build with
#   bin/llama-bench and bin/llama-quantize; its source tree (for the converter)
#   comes from its CMakeCache.txt, or $LLAMA_CPP_SRC.
# Options:
#   --models LIST    110m,1b (default both)
#   --dtypes LIST    f32,f16,bf16,int4-g32,int4-g32-h8,int4-g64 (the default), int4-g64-h8;
#                    int4 runs against Q4_0;
#                    int4-g32-h8 / int4-g64-h8: the same with --quantize-lm-head=int8
#                    (llama.cpp's Q4_0 mixture keeps its output matrix in q6_k)
#   --threads LIST   1,2 (default)
#   --tests LIST     tg64,pp512 (default both)
#   --rounds N       alternating rounds (default 3)
#   --first-round N  number of the first round (default 0): a run that continues an
#                    earlier one keeps flipping the order where that one stopped
#   --repeats N      runs per measurement (3): llama-bench -r, llmrun --repeats (each
#                    after its own untimed warm-up run); both reduced as llmrun does
#                    (sorted, the middle one; of 2, the faster)
#   --work DIR       models, GGUFs, plans and raw results ($TMPDIR/llmc-vs-llamacpp);
#                    kept and reused by the next run: delete it to start afresh
#   --tokenizer DIR  a 32000-token tokenizer.json (default ../shared/tokenizers/llama2)
# Environment: PYTHON runs the weight generator and the converter (needs numpy,
# safetensors, torch, transformers and llama.cpp's gguf-py; default python3);
# LLMC, LLMRUN (default build/tools/*);
# LLAMA_BENCH_ARGS, extra llama-bench options (e.g. "--poll 0"; default none);
# OMP_WAIT_POLICY reaches llama.cpp's OpenMP threads (passive: they sleep at
# barriers instead of spinning, which on a loaded machine changes its 2-thread
# figures several-fold; docs/perf.md) and is shown in the table's header.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODELS=110m,1b DTYPES=f32,f16,bf16,int4-g32,int4-g32-h8,int4-g64 THREADS=1,2 TESTS=tg64,pp512 ROUNDS=3 REPEATS=3 FIRST=0
WORK="${TMPDIR:-/tmp}/llmc-vs-llamacpp" TOKENIZER="$ROOT/../shared/tokenizers/llama2"
LCPP="${LLAMA_CPP_BUILD:-}"
die() { echo "error: $*" >&2; exit 1; }
while (($#)); do
  case "$1" in
    --models) MODELS="$2"; shift 2 ;;
    --dtypes) DTYPES="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --tests) TESTS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --first-round) FIRST="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --tokenizer) TOKENIZER="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) LCPP="$1"; shift ;;
  esac
done
# shellcheck source=scripts/llamacpp-env.sh
source "$ROOT/scripts/llamacpp-env.sh"
llamacpp_setup "$ROOT" "$LCPP" llama-bench llama-quantize
[[ $ROUNDS =~ ^[1-9][0-9]*$ && $REPEATS =~ ^[1-9][0-9]*$ ]] || die "--rounds and --repeats take positive integers"
[[ $FIRST =~ ^[0-9]+$ ]] || die "--first-round takes a non-negative integer"
IFS=, read -ra models <<<"$MODELS"
IFS=, read -ra dtypes <<<"$DTYPES"
IFS=, read -ra threads <<<"$THREADS"
for m in "${models[@]}"; do [[ $m == 110m || $m == 1b ]] || die "--models: '$m' is not 110m or 1b"; done
for d in "${dtypes[@]}"; do
  [[ $d =~ ^(f32|f16|bf16|int4-g(32|64)(-h8)?)$ ]] ||
    die "--dtypes: '$d' is not f32, f16, bf16, int4-g32, int4-g64, int4-g32-h8 or int4-g64-h8"
done
for t in "${threads[@]}"; do [[ $t =~ ^[1-9][0-9]*$ ]] || die "--threads: '$t' is not a positive integer"; done
PP=0 TG=0
IFS=, read -ra tests <<<"$TESTS"
for t in "${tests[@]}"; do
  case "$t" in pp512) PP=512 ;; tg64) TG=64 ;; *) die "--tests: '$t' is not tg64 or pp512" ;; esac
done
mkdir -p "$WORK"
log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }

gguf_of() { # gguf_of MODEL DTYPE -> path (int4-* runs against Q4_0)
  case "$2" in int4-*) echo "$WORK/$1-q4_0.gguf" ;; *) echo "$WORK/$1-$2.gguf" ;; esac
}
plan_of() { echo "$WORK/$1-$2.plan"; }

prepare() { # prepare MODEL: HF weights, GGUFs, plans (each made once, then reused)
  local m="$1" hf="$WORK/$1-hf" d
  if [[ ! -f $hf/model.safetensors.index.json ]]; then
    log "$m: random weights -> $hf"
    "$PYTHON" "$ROOT/scripts/make-random-hf-model.py" "$m" "$hf" --tokenizer "$TOKENIZER" >&2
  fi
  for d in "${dtypes[@]}"; do
    local gguf; gguf="$(gguf_of "$m" "$d")"
    if [[ ! -f $gguf ]]; then
      if [[ $d == int4-* ]]; then
        [[ -f $WORK/$m-f32.gguf ]] || convert "$m" f32
        log "$m: llama-quantize Q4_0"
        "$LCPP/bin/llama-quantize" "$WORK/$m-f32.gguf" "$gguf.tmp" Q4_0 >"$WORK/$m-q4_0.quantize.log" 2>&1 ||
          die "llama-quantize failed: $WORK/$m-q4_0.quantize.log"
        mv "$gguf.tmp" "$gguf"
      else
        convert "$m" "$d"
      fi
    fi
    local plan; plan="$(plan_of "$m" "$d")"
    if [[ ! -f $plan ]]; then
      log "$m: llmc build $d"
      local args=(--dtype "$d")
      if [[ $d == int4-* ]]; then
        local g=${d#int4-g}
        args=(--dtype bf16 --quantize rtn --group-size "${g%-h8}")
        [[ $d == *-h8 ]] && args+=(--quantize-lm-head=int8)
      fi
      "$LLMC" build "$hf" "${args[@]}" --target cpu -o "$plan.tmp" >"$plan.log" 2>&1 ||
        die "llmc build failed: $plan.log"
      mv "$plan.tmp" "$plan"
    fi
  done
}

convert() { # convert MODEL OUTTYPE
  log "$1: convert_hf_to_gguf.py --outtype $2"
  "$PYTHON" "$CONVERT" "$WORK/$1-hf" --outtype "$2" --outfile "$WORK/$1-$2.gguf.tmp" \
    >"$WORK/$1-$2.convert.log" 2>&1 || die "the converter failed: $WORK/$1-$2.convert.log"
  mv "$WORK/$1-$2.gguf.tmp" "$WORK/$1-$2.gguf"
}

bench_llamacpp() { # MODEL DTYPE THREADS -> two jsonl lines (pp512, tg64)
  # shellcheck disable=SC2086 # LLAMA_BENCH_ARGS is a list of words
  "$LCPP/bin/llama-bench" -m "$(gguf_of "$1" "$2")" -p "$PP" -n "$TG" -t "$3" -r "$REPEATS" -o jsonl \
    ${LLAMA_BENCH_ARGS:-} 2>/dev/null
}
bench_llmc() { # MODEL DTYPE THREADS PROMPT GEN BANDWIDTH_FLAG -> one JSON line
  "$LLMRUN" bench "$(plan_of "$1" "$2")" --prompt-len "$4" --gen-len "$5" --repeats "$REPEATS" \
    -t "$3" --json --no-verify "$6"
}

RESULTS="$WORK/results-$(date -u +%Y%m%dT%H%M%S).txt"
for m in "${models[@]}"; do prepare "$m"; done
bandwidth() { # tag: one probe per thread count
  local t
  for t in "${threads[@]}"; do
    echo "bandwidth $1 $t $("$LLMRUN" bench "$(plan_of "${models[0]}" "${dtypes[0]}")" --prompt-len 1 \
      --gen-len 2 --repeats 1 -t "$t" --json --no-verify | python3 -c \
      'import json,sys; print(json.load(sys.stdin)["machine_read_gb_per_second"])')" >>"$RESULTS"
  done
}
{
  echo "#date $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "#cpu $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
  echo "#llmc $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- runtime tools || echo '+changes')"
  echo "#llamacpp $("$LCPP/bin/llama-bench" --version 2>&1 | head -1 | tr -d '\n')${LLAMA_BENCH_ARGS:+, llama-bench $LLAMA_BENCH_ARGS}${OMP_WAIT_POLICY:+, OMP_WAIT_POLICY=$OMP_WAIT_POLICY}"
} >"$RESULTS"
log "bandwidth probe"
bandwidth before
for ((round = FIRST; round < FIRST + ROUNDS; ++round)); do
  for m in "${models[@]}"; do
    for d in "${dtypes[@]}"; do
      for t in "${threads[@]}"; do
        order=(llamacpp llmc)
        ((round % 2)) && order=(llmc llamacpp)
        log "round $((round + 1))/$((FIRST + ROUNDS)): $m $d, $t thr (load $(cut -d' ' -f1 /proc/loadavg))"
        for which in "${order[@]}"; do
          key="$round $m $d $t"
          echo "load $key $(cut -d' ' -f1 /proc/loadavg)" >>"$RESULTS"
          if [[ $which == llamacpp ]]; then
            bench_llamacpp "$m" "$d" "$t" | sed "s/^/llamacpp $key /" >>"$RESULTS"
          else
            ((PP)) && echo "llmc-pp $key $(bench_llmc "$m" "$d" "$t" 512 1 --no-bandwidth | tr -d '\n')" >>"$RESULTS"
            ((TG)) && echo "llmc-tg $key $(bench_llmc "$m" "$d" "$t" 1 65 --paired-bandwidth | tr -d '\n')" >>"$RESULTS"
          fi
        done
      done
    done
  done
done
bandwidth after
log "raw results: $RESULTS"
python3 - "$RESULTS" <<'PY'
import json, statistics, sys
def median(v):  # as llmrun bench reduces its repeats: sorted, the middle one (of 2, the larger)
    v = sorted(v)
    return v[len(v) // 2]
head, bw, loads, rows = {}, {}, [], {}
lines = [line for path in sys.argv[1:] for line in open(path)]  # several runs' files may be given
for line in lines:
    tag, rest = line.rstrip("\n").split(" ", 1)
    if tag.startswith("#"):
        head[tag[1:]] = rest
        continue
    if tag == "bandwidth":
        when, t, gbs = rest.split()
        bw.setdefault(int(t), []).append(float(gbs))
        continue
    rnd, m, d, t, payload = rest.split(" ", 4)
    key = (m, d, int(t))
    r = rows.setdefault(key, {}).setdefault(int(rnd), {})
    if tag == "load":
        loads.append(float(payload))
    elif tag == "llamacpp":
        j = json.loads(payload)
        r["lc-pp" if j["n_prompt"] else "lc-tg"] = median(j["samples_ts"])
    else:
        j = json.loads(payload)
        if tag == "llmc-pp":
            r["pp"] = j["prefill_tokens_per_second"]
        else:
            r["tg"] = j["decode_tokens_per_second"]
            r["gbs"] = j["decode_weight_read_gb_per_second"]
            if "paired_fraction_of_bandwidth" in j:
                r["paired"] = j["paired_fraction_of_bandwidth"]
print("%s, %s; llmc %s; llama.cpp %s" % (head.get("date"), head.get("cpu"), head.get("llmc"),
                                           head.get("llamacpp")))
print("| model | dtype (llama.cpp) | thr | tg64 llmc / llama.cpp tok/s | ratio | llmc decode GB/s, %bw "
      "| %bw paired | pp512 llmc / llama.cpp tok/s | ratio |")
print("|---|---|---|---|---|---|---|---|---|")
order = {"110m": 0, "1b": 1}
dorder = {"f32": 0, "f16": 1, "bf16": 2, "int4-g32": 3, "int4-g32-h8": 4, "int4-g64": 5,
          "int4-g64-h8": 6}
for (m, d, t) in sorted(rows, key=lambda k: (order[k[0]], dorder[k[1]], k[2])):
    rounds = list(rows[(m, d, t)].values())
    def both(a, b):  # rounds that measured both
        return [r for r in rounds if a in r and b in r]
    def cells(a, b):  # "llmc / llama.cpp" medians and the median of per-round ratios
        rs = both(a, b)
        if not rs:
            return "-", "-"
        return ("%.1f / %.1f" % (statistics.median(r[a] for r in rs), statistics.median(r[b] for r in rs)),
                "**%.2f**" % statistics.median(r[a] / r[b] for r in rs))
    peak = max(bw.get(t, [0.0]))
    tg = both("tg", "lc-tg")
    gbs = statistics.median(r["gbs"] for r in tg) if tg else 0.0
    pbw = ("%.2f, %.0f%%" % (gbs, 100 * gbs / peak)) if tg and peak else "-"
    # Each run against the probes just before and after it (llmrun bench --paired-bandwidth).
    paired = [r["paired"] for r in tg if "paired" in r]
    pairedCell = "%.0f%%" % (100 * statistics.median(paired)) if paired else "-"
    print("| %s | %s | %d | %s | %s | %s | %s | %s | %s |" % ((m, d + (" (Q4_0)" if d.startswith("int4") else ""), t)
          + cells("tg", "lc-tg") + (pbw, pairedCell) + cells("pp", "lc-pp")))
print("complete rounds (most of any row): %d; read bandwidth (llmrun bench probe, before / after): %s; load average (1 min) "
      "during the runs: %.1f to %.1f" % (
          max((sum(1 for r in v.values() if ("tg" in r and "lc-tg" in r) or ("pp" in r and "lc-pp" in r))
               for v in rows.values()), default=0),
          ", ".join("%d thr %s GB/s" % (t, " / ".join("%.1f" % g for g in v)) for t, v in sorted(bw.items())),
          min(loads, default=0), max(loads, default=0)))
PY
