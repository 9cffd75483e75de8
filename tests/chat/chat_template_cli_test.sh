#!/usr/bin/env bash
# llmrun chat-template: exact output (no newline added), --context, --add-generation-prompt,
# raise_exception -> exit 1 with the message on stderr, and bad inputs named.
# Usage: chat_template_cli_test.sh LLMRUN TESTS_CHAT_DIR
set -u
LLMRUN="$1"
DIR="$2"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
failures=0
check() { # check NAME EXPECTED ACTUAL
  if [[ "$2" != "$3" ]]; then
    echo "FAIL: $1"; echo "  expected: $(printf %q "$2")"; echo "  actual:   $(printf %q "$3")"
    failures=$((failures + 1))
  else
    echo "ok: $1"
  fi
}

printf '%s' '{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}{{ eos_token }}' > "$WORK/t.jinja"
printf '%s' '[{"role": "user", "content": "héllo\n"}]' > "$WORK/m.json"
printf '%s' '{"eos_token": "</s>", "bos_token": "<s>"}' > "$WORK/c.json"

"$LLMRUN" chat-template --template "$WORK/t.jinja" --messages "$WORK/m.json" > "$WORK/out1"
check "no trailing newline added" "$(printf '<user>héllo\nx')" "$(cat "$WORK/out1"; printf x)"
out2="$("$LLMRUN" chat-template --template "$WORK/t.jinja" --messages "$WORK/m.json" --context "$WORK/c.json" --add-generation-prompt; printf x)"
check "context and generation prompt" "$(printf '<user>héllo\n<assistant></s>x')" "$out2"

# The shipped Llama-2-style template raises on roles that do not alternate.
printf '%s' '[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]' > "$WORK/bad.json"
"$LLMRUN" chat-template --template "$DIR/templates/llama2_style.jinja" --messages "$WORK/bad.json" --context "$WORK/c.json" > "$WORK/out3" 2> "$WORK/err3"
rc=$?
check "raise_exception exits 1" "1" "$rc"
check "raise_exception prints nothing on stdout" "" "$(cat "$WORK/out3")"
grep -q "error: .*llama2_style.jinja:11:[0-9]*: raise_exception: Conversation roles must alternate" "$WORK/err3" \
  && echo "ok: raise_exception message on stderr" || { echo "FAIL: stderr was: $(cat "$WORK/err3")"; failures=$((failures + 1)); }

"$LLMRUN" chat-template --template "$WORK/missing.jinja" --messages "$WORK/m.json" 2> "$WORK/err4"
check "missing template exits 1" "1" "$?"
grep -q "missing.jinja" "$WORK/err4" && echo "ok: missing file named" || { echo "FAIL: $(cat "$WORK/err4")"; failures=$((failures + 1)); }

printf '%s' '{"role": ' > "$WORK/broken.json"
"$LLMRUN" chat-template --template "$WORK/t.jinja" --messages "$WORK/broken.json" 2> "$WORK/err5"
check "broken JSON exits 1" "1" "$?"
grep -q "broken.json: not valid JSON" "$WORK/err5" && echo "ok: broken JSON named" || { echo "FAIL: $(cat "$WORK/err5")"; failures=$((failures + 1)); }

printf '%s' '{% if %}' > "$WORK/syntax.jinja"
"$LLMRUN" chat-template --template "$WORK/syntax.jinja" --messages "$WORK/m.json" 2> "$WORK/err6"
check "syntax error exits 1" "1" "$?"
grep -q "syntax.jinja:1:7: " "$WORK/err6" && echo "ok: syntax error position" || { echo "FAIL: $(cat "$WORK/err6")"; failures=$((failures + 1)); }

"$LLMRUN" chat-template --messages "$WORK/m.json" 2> /dev/null
[[ $? -ne 0 ]] && echo "ok: --template is required" || { echo "FAIL: no --template accepted"; failures=$((failures + 1)); }

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"
