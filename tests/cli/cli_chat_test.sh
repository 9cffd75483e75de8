#!/usr/bin/env bash
# llmrun chat on a plan of the default model with a chat template
# (model_dir.sh): piped stdin (one answer line per turn, /clear, /exit, the
# KV cache of earlier turns reused), a session under a pseudo-terminal
# (libedit), and llmrun chat-template with a plan as the template source.
# Usage: cli_chat_test.sh <build dir> <source dir>
set -euo pipefail
BUILD="$1"
SRC="$2"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
LLMRUN="$BUILD/tools/llmrun"
source "$(dirname "$0")/model_dir.sh"
P="$WORK/p.plan"
fail() { echo "FAILED: $*" >&2; exit 1; }

# Piped: each turn prints its answer and a newline; -v tells what the KV cache gave.
printf 'hello\nhow are you\n/clear\nhello\n/exit\nnever read\n' |
  "$LLMRUN" chat "$P" -n 4 --temp 0 --ignore-eos -sys "Be brief." -v >"$WORK/chat.out" 2>"$WORK/chat.err"
grep -q "turn 2: .* prompt tokens, [1-9][0-9]* from the KV cache" "$WORK/chat.err" ||
  fail "turn 2 did not reuse the KV cache: $(cat "$WORK/chat.err")"
grep -q "turn 3: .* 0 from the KV cache" "$WORK/chat.err" || fail "/clear kept the cache"
# The first answer is what a fresh generation on the rendered prompt gives,
# and after /clear the same conversation gives it again.
echo '[{"role":"system","content":"Be brief."},{"role":"user","content":"hello"}]' >"$WORK/m.json"
"$LLMRUN" chat-template "$P" --messages "$WORK/m.json" --add-generation-prompt >"$WORK/rendered.txt"
grep -q "^<|begin_of_text|><system>Be brief." "$WORK/rendered.txt" || fail "chat-template PLAN: $(cat "$WORK/rendered.txt")"
"$LLMRUN" "$P" -f "$WORK/rendered.txt" --no-bos -n 4 --temp 0 --ignore-eos --json -q >"$WORK/direct.json"
python3 - "$WORK/direct.json" "$WORK/chat.out" <<'PY'
import json, sys
direct = json.load(open(sys.argv[1]))["text"]
out = open(sys.argv[2], encoding="utf-8", errors="replace").read()
assert len(direct) > 0, direct
assert out.startswith(direct + "\n"), (out, direct)
assert out.endswith("\n" + direct + "\n"), (out, direct)
assert out.count("\n") >= 3, out
PY
# A template the plan lacks is named with the ones it has.
set +e
echo hi | "$LLMRUN" chat "$P" --chat-template nope -n 2 2>"$WORK/t.err" >/dev/null; rc=$?
set -e
[[ $rc != 0 ]] && grep -q "has no chat template 'nope' (it has: default, plain)" "$WORK/t.err" ||
  fail "template name: $(cat "$WORK/t.err")"

# Under a pseudo-terminal: the prompt, line editing, the answer, /exit.
python3 - "$LLMRUN" "$P" <<'PY'
import os, pty, select, sys, time
llmrun, plan = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    os.execv(llmrun, [llmrun, "chat", plan, "-n", "3", "--temp", "0", "--ignore-eos", "-q"])
out = b""
def read_until(needle, seconds=60, count=1):
    global out
    deadline = time.time() + seconds
    while out.count(needle) < count and time.time() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                out += os.read(fd, 4096)
            except OSError:
                break
    return out.count(needle) >= count
assert read_until(b"> "), out
os.write(fd, b"hellp\x7fo\r")  # a typo fixed with backspace: libedit edits the line
assert read_until(b"> ", 60, count=2), out  # the answer, then the next prompt
os.write(fd, b"/exit\r")
deadline = time.time() + 30
status = None
while time.time() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    read_until(b"\0", 0.5)
else:
    os.kill(pid, 9)
    raise SystemExit("chat did not exit after /exit: %r" % out)
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (status, out)
print("pty chat ok")
PY
echo "cli_chat_test: all passed"
