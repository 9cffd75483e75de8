# Sourced by the CLI tests: writes $WORK/model (the default model's config
# and tokenizer, a tokenizer_config.json with a chat template and special
# tokens, a generation_config.json with an extra EOS id and sampling
# defaults) and builds it into $WORK/p.plan (synthetic weights, CPU only,
# context 64). Needs BUILD, SRC, WORK.
mkdir -p "$WORK/model"
cp "$SRC/scripts/default-model/config.json" "$SRC/scripts/default-model/tokenizer.json" \
  "$WORK/model/"
cat >"$WORK/model/tokenizer_config.json" <<'JSON'
{"bos_token": "<|begin_of_text|>",
 "eos_token": {"content": "<|end_of_text|>", "__type": "AddedToken"},
 "chat_template": [
   {"name": "default", "template": "{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"},
   {"name": "plain", "template": "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"}]}
JSON
cat >"$WORK/model/generation_config.json" <<'JSON'
{"eos_token_id": [1, 5], "temperature": 0.7, "top_k": 20}
JSON
"$BUILD/tools/llmc" build "$WORK/model" --synthetic-weights --target cpu --max-seq-len 64 \
  --dtype float32 -o "$WORK/p.plan" 2>"$WORK/build.log"
