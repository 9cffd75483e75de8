#!/usr/bin/env bash
# llmrun's generation CLI as llama.cpp and vLLM users type it, on a plan of
# the default model (model_dir.sh): flags and aliases, seeds, -n 0 / -n -1,
# the context's end, stop strings, logprobs, validation before any output,
# write errors, the plan's generation settings; llm-opt --help.
# Usage: cli_generate_test.sh <build dir> <source dir>
set -euo pipefail
BUILD="$1"
SRC="$2"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
LLMRUN="$BUILD/tools/llmrun"
source "$(dirname "$0")/model_dir.sh"
P="$WORK/p.plan"
fail() { echo "FAILED: $*" >&2; exit 1; }
json() { python3 -c "import json,sys; j=json.load(open('$1')); print($2)"; }

# The plan carries tokenizer_config.json's and generation_config.json's settings.
"$LLMRUN" inspect "$P" >"$WORK/inspect.txt"
grep -q "eos ids \[1,5\]" "$WORK/inspect.txt" || fail "eos ids not joined: $(cat "$WORK/inspect.txt")"
grep -q "chat templates: default (.* B), plain" "$WORK/inspect.txt" || fail "templates"
grep -q "bos_token=<|begin_of_text|> eos_token=<|end_of_text|>" "$WORK/inspect.txt" || fail "tokens"
grep -q "\"temperature\":0.7[,}]" "$WORK/inspect.txt" || fail "defaults: $(cat "$WORK/inspect.txt")"

# -n 0 generates nothing; -n N generates N (EOS ignored: synthetic weights).
"$LLMRUN" "$P" -p "Once upon a time" -n 0 --json -q >"$WORK/n0.json"
[[ "$(json "$WORK/n0.json" 'j["ids"]')" == "[]" ]] || fail "-n 0"
"$LLMRUN" -m "$P" -p "Once upon a time" --n-predict 5 --ignore-eos --json -q >"$WORK/n5.json"
[[ "$(json "$WORK/n5.json" 'len(j["ids"])')" == 5 ]] || fail "--n-predict 5"

# -n -1 runs to the end of the context and says so on stderr.
"$LLMRUN" "$P" -p "Once upon a time" -n -1 -c 16 --ignore-eos --json 2>"$WORK/ctx.err" >"$WORK/ctx.json"
[[ "$(json "$WORK/ctx.json" 'len(j["prompt_ids"]) + len(j["ids"])')" == 17 ]] || fail "-n -1 -c 16"
[[ "$(json "$WORK/ctx.json" 'j["context_full"]')" == True ]] || fail "context_full"
grep -q "the context is full (16 tokens)" "$WORK/ctx.err" || fail "context message: $(cat "$WORK/ctx.err")"

# A random seed by default, in --json and with -v; --seed / -s reproduce it.
"$LLMRUN" "$P" -p "Hi" -n 8 --ignore-eos --json -q >"$WORK/r1.json"
"$LLMRUN" "$P" -p "Hi" -n 8 --ignore-eos --json -q >"$WORK/r2.json"
[[ "$(json "$WORK/r1.json" 'j["seed"]')" != "$(json "$WORK/r2.json" 'j["seed"]')" ]] || fail "seed not random"
SEED="$(json "$WORK/r1.json" 'j["seed"]')"
"$LLMRUN" "$P" -p "Hi" -n 8 --ignore-eos --json -q -s "$SEED" >"$WORK/r3.json"
[[ "$(json "$WORK/r1.json" 'j["ids"]')" == "$(json "$WORK/r3.json" 'j["ids"]')" ]] || fail "-s does not reproduce"
"$LLMRUN" "$P" -p "Hi" -n 2 --seed 9 -v >/dev/null 2>"$WORK/v.err"
grep -q "llmrun: seed 9" "$WORK/v.err" || fail "-v seed"
# The plan's generation_config defaults apply; an explicit flag wins.
grep -q "from the plan's generation_config: temperature 0.7" "$WORK/v.err" || fail "plan default"
"$LLMRUN" "$P" -p "Hi" -n 2 --temp 0 -v >/dev/null 2>"$WORK/v0.err"
! grep -q "temperature 0.7" "$WORK/v0.err" || fail "--temp 0 did not win"

# The flags llama.cpp users type.
"$LLMRUN" -m "$P" -p "Hi" --temp 0.8 -c 32 -t 1 --repeat-penalty 1.1 -s 3 --n-predict 3 \
  --top-k 5 --top-p 0.9 --min-p 0.05 --frequency-penalty 0.5 --presence-penalty 0.5 \
  --min-tokens 2 --ignore-eos -q >/dev/null || fail "llama.cpp flags"

# --threads past the cores this process may run on is capped, with a warning.
CORES="$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')"
"$LLMRUN" "$P" -p "Hi" -n 1 -t $((CORES + 3)) -q >/dev/null 2>"$WORK/t.err" || fail "-t past the cores"
grep -q "warning: --threads $((CORES + 3)) is more than the $CORES cores this process may run on; using $CORES" \
  "$WORK/t.err" || fail "threads warning: $(cat "$WORK/t.err")"
[[ $(grep -c "warning: --threads" "$WORK/t.err") == 1 ]] || fail "threads warning not once: $(cat "$WORK/t.err")"

# Unknown flags: the nearest known one, errors in the order given.
set +e
"$LLMRUN" "$P" -p hi --temprature 0.8 --bogus 2>"$WORK/u.err" >"$WORK/u.out"; rc=$?
set -e
[[ $rc == 2 ]] || fail "unknown flag exit $rc"
grep -q "unknown option '--temprature'; did you mean --temperature?" "$WORK/u.err" || fail "$(cat "$WORK/u.err")"
! grep -q bogus "$WORK/u.err" || fail "not the first error first"
[[ ! -s "$WORK/u.out" ]] || fail "output before the error"

# Parse errors in the order given: whatever kind each is (a value that does
# not convert, an unknown flag, a stray argument, a missing value), the
# first one on the command line is the one reported.
first_error() { # first_error PATTERN NOT-PATTERN ARGS...
  local pattern="$1" other="$2"; shift 2
  set +e; "$LLMRUN" "$@" >"$WORK/o.out" 2>"$WORK/o.err"; local rc=$?; set -e
  [[ $rc == 2 ]] || fail "exit $rc for: $*"
  [[ ! -s "$WORK/o.out" ]] || fail "stdout before the error for: $*"
  grep -q -- "$pattern" "$WORK/o.err" || fail "for $*: expected '$pattern', got: $(cat "$WORK/o.err")"
  ! grep -q -- "$other" "$WORK/o.err" || fail "for $*: '$other' reported: $(cat "$WORK/o.err")"
}
first_error "top-k = x" "bogus" "$P" -p hi --top-k x --bogus
first_error "unknown option '--bogus'" "top-k" "$P" -p hi --bogus --top-k x
first_error "top-k = x" "max-tokens" "$P" -p hi --top-k x -n y
first_error "max-tokens = y" "top-k" "$P" -p hi -n y --top-k x
first_error "max-tokens = y" "top-k" "$P" -p hi --n-predict=y --top-k=x
first_error "unexpected argument 'stray'" "bogus" "$P" stray -p hi --bogus
first_error "unknown option '--bogus'" "stray" "$P" -p hi --bogus stray
first_error "option --seed needs a value" "convert" "$P" -p hi -n 3 --seed
first_error "seed = z" "threads" "$P" -p hi -s z -t w
first_error "unknown option '--temprature'" "needs a value" "$P" -p hi --temprature 1 --seed
# llmc too: a value that does not convert before an unknown flag, and the
# other way round; an optional value (--synthetic-weights [SEED]) is still taken.
set +e
"$BUILD/tools/llmc" build "$WORK/model" --max-seq-len x --bogus -o "$WORK/x.plan" 2>"$WORK/c1.err"; rc1=$?
"$BUILD/tools/llmc" build "$WORK/model" --bogus --max-seq-len x -o "$WORK/x.plan" 2>"$WORK/c2.err"; rc2=$?
set -e
[[ $rc1 == 2 && $rc2 == 2 && ! -e "$WORK/x.plan" ]] || fail "llmc exit codes $rc1 $rc2"
grep -q -- "max-seq-len = x" "$WORK/c1.err" && ! grep -q bogus "$WORK/c1.err" ||
  fail "llmc order: $(cat "$WORK/c1.err")"
grep -q "unknown option '--bogus'" "$WORK/c2.err" && ! grep -q max-seq-len "$WORK/c2.err" ||
  fail "llmc order: $(cat "$WORK/c2.err")"
"$BUILD/tools/llmc" build "$WORK/model" --synthetic-weights 5 --target cpu --max-seq-len 64 \
  -o "$WORK/s5.plan" 2>/dev/null || fail "--synthetic-weights SEED"
"$LLMRUN" inspect "$WORK/s5.plan" | grep -q -- "--synthetic-weights=5" || fail "the seed 5 was not taken"

# Bad values and an over-long prompt fail before the prompt is echoed.
expect_error() { # expect_error PATTERN ARGS...
  local pattern="$1"; shift
  set +e; "$LLMRUN" "$@" >"$WORK/e.out" 2>"$WORK/e.err"; local rc=$?; set -e
  [[ $rc != 0 ]] || fail "no error for: $*"
  [[ ! -s "$WORK/e.out" ]] || fail "stdout before the error for: $* ($(cat "$WORK/e.out"))"
  grep -q -- "$pattern" "$WORK/e.err" || fail "for $*: expected '$pattern', got: $(cat "$WORK/e.err")"
}
expect_error "error: --temperature: expected a finite number >= 0" "$P" -p "Once upon" --temperature -1
expect_error "error: --top-p" "$P" -p "Once upon" --top-p 0
expect_error "error: --presence-penalty" "$P" -p "Once upon" --presence-penalty 3
expect_error "error: -n/--max-tokens -2" "$P" -p "Once upon" -n -2
expect_error "over the context of 8 tokens" "$P" -p "Once upon a time there was a long prompt that does not fit" -c 8
expect_error "the plan's context is 64 tokens" "$P" -p "Hi" -c 100
expect_error "no prompt" "$P"
expect_error "--logprobs shows in the JSON output" "$P" -p hi --logprobs 2
expect_error "cannot create" "$P" -p hi -n 2 --dump-logits "$WORK/no/such/dir/l.f32"
[[ ! -e "$WORK/no/such/dir/l.f32" ]] || fail "dump file left"

# The prompt from stdin (-p -) and from a file (-f) encodes as with -p.
"$LLMRUN" "$P" -p "Once upon a time" -n 0 --json -q >"$WORK/pa.json"
printf 'Once upon a time' | "$LLMRUN" "$P" -p - -n 0 --json -q >"$WORK/pb.json"
printf 'Once upon a time' >"$WORK/prompt.txt"
"$LLMRUN" "$P" -f "$WORK/prompt.txt" -n 0 --json -q >"$WORK/pc.json"
for f in pb pc; do
  [[ "$(json "$WORK/pa.json" 'j["prompt_ids"]')" == "$(json "$WORK/$f.json" 'j["prompt_ids"]')" ]] || fail "$f prompt"
done

# Writing to a full stdout fails, streaming or --json.
set +e
"$LLMRUN" "$P" -p hi -n 3 -q >/dev/full 2>"$WORK/full.err"; rc1=$?
"$LLMRUN" "$P" -p hi -n 3 -q --json >/dev/full 2>>"$WORK/full.err"; rc2=$?
set -e
[[ $rc1 != 0 && $rc2 != 0 ]] || fail "/dev/full exit codes $rc1 $rc2"
grep -q "cannot write the output to stdout" "$WORK/full.err" || fail "full: $(cat "$WORK/full.err")"

# Stop strings: the text ends before the first one, which is not shown.
"$LLMRUN" "$P" -p "Hi" -n 12 --temp 0 --ignore-eos --json -q >"$WORK/free.json"
STOP="$(json "$WORK/free.json" 'j["text"][3:5]')"
if [[ -n "$STOP" ]]; then
  "$LLMRUN" "$P" -p "Hi" -n 12 --temp 0 --ignore-eos --json -q --stop "zzzq" --stop "$STOP" >"$WORK/stop.json"
  python3 - "$WORK/free.json" "$WORK/stop.json" "$STOP" <<'PY'
import json, sys
free, stop, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
assert stop["finish_reason"] == "stop", stop
assert stop["stop_string"] == s, stop
assert stop["text"] == free["text"][:free["text"].find(s)], (stop["text"], free["text"], s)
PY
fi

# Logprobs: the chosen token's and the top N, in the JSON.
"$LLMRUN" "$P" -p "Hi" -n 3 --ignore-eos --logprobs 2 --json -q -s 1 >"$WORK/lp.json"
python3 - "$WORK/lp.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert len(j["logprobs"]) == len(j["ids"]) == 3, j
for entry, token in zip(j["logprobs"], j["ids"]):
    assert entry["id"] == token and entry["logprob"] <= 0, entry
    assert 1 <= len(entry["top_logprobs"]) <= 2, entry
    assert entry["top_logprobs"][0]["logprob"] >= entry["logprob"] - 1e-6, entry
PY

# --dump-logits writes [positions][vocab] f32.
"$LLMRUN" "$P" -p "Hi" -n 2 --ignore-eos --json -q --dump-logits "$WORK/l.f32" >"$WORK/d.json"
POS="$(json "$WORK/d.json" 'len(j["prompt_ids"]) + len(j["ids"]) - 1')"
[[ "$(stat -c %s "$WORK/l.f32")" == $((POS * 512 * 4)) ]] || fail "dump size"

# -q prints nothing on stderr; the backend notice is one line.
"$LLMRUN" "$P" -p hi -n 2 -q >/dev/null 2>"$WORK/q.err"
[[ ! -s "$WORK/q.err" ]] || fail "-q printed: $(cat "$WORK/q.err")"
"$LLMRUN" "$P" -p hi -n 2 >/dev/null 2>"$WORK/i.err"
[[ "$(grep -c "running on" "$WORK/i.err")" == 1 ]] || fail "notice: $(cat "$WORK/i.err")"
"$LLMRUN" "$P" -p hi -n 2 --log-level error >/dev/null 2>"$WORK/le.err"
[[ ! -s "$WORK/le.err" ]] || fail "--log-level error printed"

# `llmrun bench serve` is vllm's spelling of llmrun bench-serve (built with the server).
if "$LLMRUN" bench-serve --help >/dev/null 2>&1; then
  "$LLMRUN" bench serve --help >"$WORK/bs.txt" || fail "llmrun bench serve --help"
  grep -q -- "--max-concurrency" "$WORK/bs.txt" || fail "bench serve help: $(cat "$WORK/bs.txt")"
fi

# llmrun help; llm-opt --help lists llmc's options and passes, not LLVM's.
"$LLMRUN" help >"$WORK/help.txt"
grep -q "chat" "$WORK/help.txt" || fail "llmrun help"
if [[ -x "$BUILD/tools/llm-opt" ]]; then
  "$BUILD/tools/llm-opt" --help >"$WORK/opt.txt"
  grep -q -- "--llm-prune" "$WORK/opt.txt" || fail "llm-opt passes"
  [[ "$(wc -l <"$WORK/opt.txt")" -lt 40 ]] || fail "llm-opt --help is long"
  ! grep -q -- "--x86-asm-syntax\|--debug-pass" "$WORK/opt.txt" || fail "LLVM options shown"
fi
echo "cli_generate_test: all passed"
