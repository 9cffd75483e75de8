#!/usr/bin/env python3
"""Regenerates scripts/default-model/tokenizer.json: a 512-token byte-level BPE
(GPT-2 style pre-tokenizer and decoder) trained on this project's own
documentation, so the default model needs no third-party data. Run by hand
(`pip install tokenizers`); the result is committed and CI never runs this."""
import glob
import os

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    files = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + [os.path.join(ROOT, "README.md")]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train([f for f in files if os.path.exists(f)], trainer)
    bos = tokenizer.token_to_id("<|begin_of_text|>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)]
    )
    out = os.path.join(ROOT, "scripts", "default-model", "tokenizer.json")
    tokenizer.save(out)
    print(f"wrote {out}: {tokenizer.get_vocab_size()} tokens")


if __name__ == "__main__":
    main()
