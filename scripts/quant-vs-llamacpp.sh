#!/usr/bin/env bash
# Quantization quality of llmc next to llama.cpp's quants (issue 19; method and
# figures in docs/quantization.md, "stories260K next to llama.cpp's quants").
#
# One model (default stories260K, Hugging Face layout) and one text. llama.cpp:
# its convert_hf_to_gguf.py makes an f32 GGUF, llama-quantize makes Q4_0, Q4_K_M
# and Q8_0 from it, llama-perplexity scores them. llmc: f32, int4 RTN, AWQ and
# GPTQ at G = 32, 64, 128 (AWQ/GPTQ calibrated on --calib), and int8 where this
# llmc has `--quantize int8` (said so in the table where it has not).
#
# The two perplexity protocols differ: llama-perplexity cuts the text (BOS in
# front) into whole windows of ctx tokens, puts BOS in place of each window's
# first token and scores only the second half; `llmrun perplexity` by default
# predicts every id of windows of ctx - 1 ids after BOS. llmc's plans are scored
# both ways (`--protocol second-half` is llama-perplexity's), so the column
# "second half" compares the two runtimes on the very same predictions; the
# llmc-protocol column continues the figures of docs/quantization.md.
# Bytes per weight: the bytes of the weight tensors (GGUF tensor data; the plan's
# weight section) over the model's parameter count (its safetensors); and the
# same for the linear layers alone (GGUF: the 2-D tensors but token_embd and
# output; llmc: the "linear weights -> int4 (A B -> B B)" line of `llmc build`).
#
# Usage: scripts/quant-vs-llamacpp.sh [options] [LLAMA_CPP_BUILD_DIR]
#   LLAMA_CPP_BUILD_DIR (or $LLAMA_CPP_BUILD): a llama.cpp CMake build with
#   bin/llama-quantize and bin/llama-perplexity; the converter comes from its
#   source tree (CMakeCache.txt, or $LLAMA_CPP_SRC).
# Options:
#   --model DIR     (default ../shared/models/stories260k)
#   --text FILE     scored text (default ../shared/text/tinystories_valid_excerpt_small.txt)
#   --calib FILE    AWQ/GPTQ calibration text (default ../shared/text/tinystories_train_excerpt.txt)
#   --ctx N         window (default 512)
#   --groups LIST   int4 group sizes (default 32,64,128)
#   --methods LIST  llmc methods: rtn,awq,gptq,int8 (default all)
#   --mixed RECIPE  also a mixed plan: --dtype f16 --quantize gptq --group-size 32
#                   --mixed RECIPE (docs/quantization.md, "Mixed precision"); repeatable,
#                   plans mixed1, mixed2, ... in the order given
#   --work DIR      GGUFs, plans, logs ($TMPDIR/llmc-quant-vs-llamacpp; reused: delete to redo)
# Environment: PYTHON runs the converter and reads GGUFs (torch, numpy,
# safetensors, sentencepiece and llama.cpp's gguf-py); LLMC, LLMRUN.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED="$ROOT/../shared"
MODEL="$SHARED/models/stories260k" TEXT="$SHARED/text/tinystories_valid_excerpt_small.txt"
CALIB="$SHARED/text/tinystories_train_excerpt.txt" CTX=512 GROUP_SIZES=32,64,128 METHODS=rtn,awq,gptq,int8
WORK="${TMPDIR:-/tmp}/llmc-quant-vs-llamacpp" LCPP="${LLAMA_CPP_BUILD:-}"
MIXED=()
die() { echo "error: $*" >&2; exit 1; }
while (($#)); do
  case "$1" in
    --model) MODEL="$2"; shift 2 ;;
    --text) TEXT="$2"; shift 2 ;;
    --calib) CALIB="$2"; shift 2 ;;
    --ctx) CTX="$2"; shift 2 ;;
    --groups) GROUP_SIZES="$2"; shift 2 ;;
    --methods) METHODS="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --mixed) MIXED+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) LCPP="$1"; shift ;;
  esac
done
# shellcheck source=scripts/llamacpp-env.sh
source "$ROOT/scripts/llamacpp-env.sh"
llamacpp_setup "$ROOT" "$LCPP" llama-quantize llama-perplexity
[[ -f $MODEL/config.json ]] || die "$MODEL/config.json not found (--model)"
[[ -f $TEXT ]] || die "$TEXT not found (--text)"
[[ -f $CALIB ]] || die "$CALIB not found (--calib)"
[[ $CTX =~ ^[1-9][0-9]*$ ]] || die "--ctx takes a positive integer"
IFS=, read -ra groups <<<"$GROUP_SIZES"
IFS=, read -ra methods <<<"$METHODS"
for g in "${groups[@]}"; do [[ $g =~ ^[1-9][0-9]*$ ]] || die "--groups: '$g' is not a positive integer"; done
for m in "${methods[@]}"; do [[ $m =~ ^(rtn|awq|gptq|int8)$ ]] || die "--methods: '$m' is not rtn, awq, gptq or int8"; done
mkdir -p "$WORK"
RESULTS="$WORK/results.txt"
: >"$RESULTS"
log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }

# --- llama.cpp: f32 GGUF, its quants, llama-perplexity.
if [[ ! -f $WORK/f32.gguf ]]; then
  log "convert_hf_to_gguf.py --outtype f32"
  "$PYTHON" "$CONVERT" "$MODEL" --outtype f32 --outfile "$WORK/f32.gguf.tmp" >"$WORK/convert.log" 2>&1 ||
    die "the converter failed: $WORK/convert.log"
  mv "$WORK/f32.gguf.tmp" "$WORK/f32.gguf"
fi
for q in Q4_0 Q4_K_M Q8_0; do
  if [[ ! -f $WORK/$q.gguf ]]; then
    log "llama-quantize $q"
    "$LCPP/bin/llama-quantize" "$WORK/f32.gguf" "$WORK/$q.gguf.tmp" "$q" >"$WORK/$q.quantize.log" 2>&1 ||
      die "llama-quantize $q failed: $WORK/$q.quantize.log"
    mv "$WORK/$q.gguf.tmp" "$WORK/$q.gguf"
  fi
done
for q in f32 Q4_0 Q4_K_M Q8_0; do
  log "llama-perplexity $q"
  # llama-perplexity logs through an asynchronous queue that can lose its last
  # lines at exit, the final estimate among them: run it again (at most 3 times).
  ppl=""
  for attempt in 1 2 3; do
    "$LCPP/bin/llama-perplexity" -m "$WORK/$q.gguf" -f "$TEXT" -c "$CTX" -b "$CTX" -t "$(nproc)" \
      >"$WORK/$q.perplexity.log" 2>&1 || die "llama-perplexity failed: $WORK/$q.perplexity.log"
    ppl="$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' "$WORK/$q.perplexity.log")"
    [[ -n $ppl ]] && break
    log "llama-perplexity $q: no final estimate in its log (attempt $attempt)"
  done
  [[ -n $ppl ]] || die "no 'Final estimate' in $WORK/$q.perplexity.log after 3 runs"
  echo "llamacpp $q $ppl" >>"$RESULTS"
done

# --- llmc: plans and both protocols.
plan_ppl() { # plan_ppl NAME: both protocols, and the plan's weight bytes
  local plan="$WORK/$1.plan" p
  for p in second-half llmc; do
    echo "llmc-$p $1 $("$LLMRUN" perplexity "$plan" --file "$TEXT" --ctx "$CTX" --protocol "$p" --json |
      tr -d '\n')" >>"$RESULTS"
  done
  echo "llmc-size $1 $("$LLMRUN" inspect --json --no-verify "$plan" | python3 -c \
    'import json,sys; print(json.load(sys.stdin)["size"]["weights"])')" >>"$RESULTS"
}
build_plan() { # build_plan NAME ARGS...: builds once; a failure is recorded, not fatal
  local name="$1"; shift
  if [[ ! -f $WORK/$name.plan ]]; then
    log "llmc build $name"
    if ! "$LLMC" build "$MODEL" --target cpu "$@" -o "$WORK/$name.plan.tmp" >"$WORK/$name.build.log" 2>&1; then
      echo "llmc-failed $name $(grep -m1 'error' "$WORK/$name.build.log" || tail -1 "$WORK/$name.build.log")" >>"$RESULTS"
      return 1
    fi
    mv "$WORK/$name.plan.tmp" "$WORK/$name.plan"
  fi
  plan_ppl "$name"
}
build_plan f32
has_int8=0
"$LLMC" build --help | grep -q 'int8' && has_int8=1
for m in "${methods[@]}"; do
  if [[ $m == int8 ]]; then
    if ((has_int8)); then
      build_plan int8 --quantize int8 || true
      for g in "${groups[@]}"; do build_plan "int8-g$g" --quantize int8 --group-size "$g" || true; done
    else
      echo "llmc-absent int8 this llmc has no --quantize int8 (llmc build --help)" >>"$RESULTS"
    fi
    continue
  fi
  for g in "${groups[@]}"; do
    args=(--quantize "$m" --group-size "$g")
    [[ $m == rtn ]] || args+=(--calib "$CALIB")
    build_plan "$m-g$g" "${args[@]}" || true
  done
done

for i in "${!MIXED[@]}"; do
  name="mixed$((i + 1))"
  echo "llmc-recipe $name ${MIXED[$i]}" >>"$RESULTS"
  build_plan "$name" --dtype f16 --quantize gptq --group-size 32 --calib "$CALIB" \
    --mixed "${MIXED[$i]}" || true
done

# --- The table.
"$PYTHON" - "$RESULTS" "$WORK" "$MODEL" "$CTX" <<'PY'
import glob, json, os, re, sys
import gguf
from safetensors import safe_open

results, work, model, ctx = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
params = 0
for f in glob.glob(os.path.join(model, "*.safetensors")):
    with safe_open(f, "np") as st:
        for k in st.keys():
            n = 1
            for d in st.get_slice(k).get_shape():
                n *= d
            params += n
lc, llmc, notes = {}, {}, []
for line in open(results):
    tag, name, rest = (line.rstrip("\n").split(" ", 2) + [""])[:3]
    if tag == "llamacpp":
        lc[name] = float(rest)
    elif tag in ("llmc-second-half", "llmc-llmc"):
        llmc.setdefault(name, {})[tag[5:]] = json.loads(rest)
    elif tag == "llmc-size":
        llmc.setdefault(name, {})["bytes"] = int(rest)
        summary = re.search(r"linear weights -> \S+ \((\d+) B -> (\d+) B\)",
                            open(os.path.join(work, name + ".build.log")).read())
        if summary:
            llmc[name]["linear_bytes"] = int(summary.group(2))
    elif tag in ("llmc-failed", "llmc-absent"):
        notes.append("%s: %s" % (name, rest))
    elif tag == "llmc-recipe":
        notes.append("%s: --dtype f16 --quantize gptq --group-size 32 --mixed %s" % (name, rest))


def gguf_types(path):
    """Tensor bytes, and the types used by the 2-D tensors with their roles."""
    r = gguf.GGUFReader(path)
    total, roles, linear = 0, {}, [0, 0]
    for t in r.tensors:
        total += int(t.n_bytes)
        if len(t.shape) < 2:
            continue
        if not t.name.startswith(("token_embd", "output")):
            linear[0] += int(t.n_bytes)
            linear[1] += int(t.n_elements)
        role = ".".join(p for p in t.name.split(".") if not p.isdigit() and p != "blk")
        roles.setdefault(t.tensor_type.name.lower(), set()).add(role.replace(".weight", ""))
    return total, linear, "; ".join("%s: %s" % (k, ", ".join(sorted(v))) for k, v in sorted(roles.items()))


print("parameters (safetensors): %d; ctx %d" % (params, ctx))
print()
print("| runtime | weights | bytes / weight: all | linear layers | PPL, second half "
      "(llama-perplexity's protocol) | PPL, llmc protocol |")
print("|---|---|---|---|---|---|")
types, linear_params = {}, 0
for q in ("f32", "Q8_0", "Q4_K_M", "Q4_0"):
    if q not in lc:
        continue
    size, linear, used = gguf_types(os.path.join(work, q + ".gguf"))
    types[q], linear_params = used, linear[1]
    print("| llama.cpp | %s | %.3f | %.3f | %.4f | - |" % (q, size / params, linear[0] / linear[1], lc[q]))
def order(name):  # f32, int8, then rtn, awq, gptq, each by group size
    method, _, g = name.partition("-g")
    return (["f32", "int8", "rtn", "awq", "gptq"].index(method) if method in
            ("f32", "int8", "rtn", "awq", "gptq") else 9, int(g) if g.isdigit() else 0)
for name in sorted(llmc, key=order):
    r = llmc[name]
    if "second-half" not in r:
        continue
    # A mixed plan's summary line counts its int4 linears only: no linear-layer figure.
    lin = "-" if name.startswith("mixed") else "%.3f" % (r["linear_bytes"] / linear_params) if (
        "linear_bytes" in r and linear_params) else (
        "%.3f" % (r["bytes"] / params) if name == "f32" else "-")  # f32: every weight alike
    print("| llmc | %s | %.3f | %s | %.4f | %.4f |" % (name, r["bytes"] / params, lin,
                                                     r["second-half"]["ppl"], r["llmc"]["ppl"]))
for name in ("second-half", "llmc"):
    r = llmc.get("f32", {}).get(name)
    if r:
        print("llmc %s protocol: %d windows, %d predicted ids" % (name, r["windows"], r["predicted"]))
print()
for q, used in types.items():
    print("llama.cpp %s tensor types (2-D tensors): %s" % (q, used))
for n in notes:
    print(n if n.startswith("mixed") else "not run: " + n)
PY
