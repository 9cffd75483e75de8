#!/usr/bin/env python3
"""Trains small tokenizers with Hugging Face `tokenizers` and records what it
encodes and decodes, for tests/tokenizer/tokenizer_trained_test.cpp.

  python3 tests/tokenizer/make_trained_tokenizers.py [--text ../shared/text/tinystories_train_excerpt.txt]

Writes tests/data/tokenizers/<name>.json (the tokenizer.json) and
<name>.cases.json: {"cases": [{"text", "ids", "ids_special", "decoded",
"decoded_special", "decoded_skip"}]} where ids = encode(text,
add_special_tokens=False), ids_special = encode(text, True), decoded =
decode(ids, skip_special_tokens=False), decoded_special =
decode(ids_special, False), decoded_skip = decode(ids_special, True).

Training reads the TinyStories excerpt of ../shared (not copied into the
repository) plus the multilingual lines below; the test strings are made up
here, deterministically (fixed seed). Training itself is not deterministic
(the library's parallel trainers break ties differently from run to run),
so a rerun gives other vocabularies with their own expected ids: the pair
of files committed is one run, and llmc must match any run.
"""
import argparse
import json
import os
import random

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "tokenizers")

# Lines in other scripts so that the vocabularies hold some non-Latin pieces.
EXTRA_TRAINING = [
    "Café crème brûlée, naïve façade, déjà vu, jalapeño, Ångström, Øresund.",
    "Über müde Bären größer, Straße, schön. Ça va? Où est la gare?",
    "東京は日本の首都です。私は猫が好きです。今日は天気がいいですね。",
    "我们今天去公园玩。中文分词很难。北京欢迎你。",
    "안녕하세요. 한국어를 공부합니다. 오늘 날씨가 좋네요.",
    "Привет, как дела? Я люблю читать книги.",
    "Γειά σου κόσμε. Καλημέρα!",
    "مرحبا بالعالم. שלום עולם.",
    "def main(argv):\n    return sum(x * 2 for x in range(10))  # comment\n",
    "if (a != b && c <= 42) { printf(\"%d\\n\", x[i++]); }",
    "The year 2024 had 365 days; 3.14159, 1,000,000 and 42% of $19.99.",
    "emoji 😀 🎉 👍🏽 👨‍👩‍👧 ❤️ 🇫🇷 🤖",
]

WORDS = ("the a cat dog ran jumped happy little girl boy tree sun big red ball "
         "Lily Tom said play friend house water Once upon time").split()
POOLS = {
    "latin": list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"),
    "accents": list("éèêëàâäôöûüùçñÉÀÇÑåøæœßÿíóúãõ") + ["e\u0301", "a\u0308", "n\u0303"],
    "digits": list("0123456789") + ["²", "½", "٣", "Ⅻ", "①"],
    "punct": list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + list("¡¿«»—–…“”‘’·•§¶†"),
    "cjk": list("日本語中文字漢東京北京人大小山川水火木金土"),
    "korean": list("한국어안녕하세요감사합니다가나다라"),
    "kana": list("ひらがなカタカナアイウエオ"),
    "emoji": ["😀", "🎉", "👍", "👍🏽", "👨‍👩‍👧", "❤️", "🇫🇷", "🤖", "🥰", "🫠"],
    "space": [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2003", "\u200b"],
    "other": ["\u0000", "\u0007", "\u00ad", "\ufeff", "\ufffd", "\ue000", "Ⓐ", "ﬁ", "ǅ", "İ", "Σ", "ẞ"],
}

HANDWRITTEN = [
    "", " ", "  ", "\t", "\n", "\n\n\n", " \t \n ", "a", "A", "hello", "Hello world",
    "Once upon a time, there was a little girl named Lily.",
    "  leading spaces", "trailing spaces   ", "multiple     inner     spaces",
    "tabs\tand\nnewlines\r\nmixed", "UPPER lower MiXeD", "don't can't won't I'm you're we've it's",
    "Hello, world! How are you? I'm fine... (really) [yes] {no}",
    "e-mail: someone@example.com, url: https://example.org/a?b=c&d=1#x",
    "12345", "1 2 3", "3.14159", "1,000,000", "2024-01-01T12:00:00Z", "v1.2.3-rc4", "0x1F 0b1010",
    "phone +1 (555) 123-4567", "100% of $19.99 is €20", "²³ ½ ① Ⅻ ٣٤٥",
    "café", "cafe\u0301", "naïve façade déjà vu", "Ångström Øresund", "ÀÉÎÕÜ àéîõü", "Straße GROSS",
    "İstanbul ıi", "ΣΑΣ σας ς", "ǅ ǆ Ǆ", "ﬁ ﬂ ﬀ", "Ⓐⓑⓒ", "\u00ad soft\u00adhyphen",
    "日本語のテキスト", "我们今天去公园玩。", "中文 和 English 混合", "北京欢迎你",
    "안녕하세요", "한국어를 공부합니다.", "오늘 날씨가 좋네요!", "ひらがな カタカナ",
    "Привет, мир!", "Γειά σου κόσμε", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีครับ",
    "😀", "🎉🎉🎉", "👍🏽 👨‍👩‍👧 ❤️ 🇫🇷", "I love 🤖 and 🥰 and 🫠", "emoji😀glued",
    "def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "#include <stdio.h>\nint main() { printf(\"hi\\n\"); }", "x = [1, 2, 3]; y = {'a': 1}",
    "if a != b and c <= 42:", "SELECT * FROM t WHERE id = 7;", "<html><body>hi</body></html>",
    "$ ls -la | grep foo > out.txt 2>&1", "a_b_c __init__ snake_case camelCase PascalCase",
    "....", "!!!???", "---", "***", "~~~", "((()))", "\"quoted\" 'single'", "a.b.c", "a,b,c", "a;b:c",
    "zero\u200bwidth", "bom\ufeffhere", "nbsp\u00a0space", "ideographic\u3000space", "em\u2003space",
    "control\u0007bell", "null\u0000byte", "replacement\ufffdchar", "private\ue000use",
    "<unk>", "<s>", "</s>", "[UNK]", "[CLS] [SEP]", "<s>hello</s>", "[MASK]",
    "▁already▁has▁metaspace", "Ġbyte Ġlevel", "##prefix ##ed",
    "a" * 120, "ab" * 60, "word " * 30, "x" * 5 + " " * 20 + "y", "supercalifragilisticexpialidocious",
    "pneumonoultramicroscopicsilicovolcanoconiosis", "antidisestablishmentarianism",
]


def random_strings(rng, count):
    out = []
    kinds = list(POOLS)
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 8)):
            r = rng.random()
            if r < 0.35:
                parts.append(rng.choice(WORDS))
            elif r < 0.5:
                parts.append(rng.choice(POOLS["space"]))
            else:
                pool = POOLS[rng.choice(kinds)]
                parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 4))))
        sep = rng.choice(["", " ", " ", "  ", "\n"])
        out.append(sep.join(parts))
    return out


def training_lines(text_path):
    lines = list(EXTRA_TRAINING) * 20
    if text_path and os.path.exists(text_path):
        with open(text_path, encoding="utf-8") as f:
            lines += [line for line in f.read().split("\n") if line.strip()]
    return lines


def unigram(lines):
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence(
        [normalizers.Nmt(), normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=800, special_tokens=["<unk>", "<s>", "</s>"],
                                      unk_token="<unk>", shrinking_factor=0.75)
    tok.train_from_iterator(lines, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", tok.token_to_id("<s>")),
                                              ("</s>", tok.token_to_id("</s>"))])
    return tok


def wordpiece(lines):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=1000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.train_from_iterator(lines, trainer)
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    return tok


def wordpiece_sequences(lines):
    # The same model family, with the components spelled out one by one.
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=40))
    tok.normalizer = normalizers.Sequence(
        [normalizers.NFD(), normalizers.Lowercase(), normalizers.StripAccents(),
         normalizers.Strip()])
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(),
         pre_tokenizers.Digits(individual_digits=False)])
    tok.decoder = decoders.WordPiece(cleanup=False)
    trainer = trainers.WordPieceTrainer(vocab_size=700, special_tokens=["[UNK]", "[CLS]", "[SEP]"])
    tok.train_from_iterator(lines, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", tok.token_to_id("[CLS]")),
                                                 ("[SEP]", tok.token_to_id("[SEP]"))])
    return tok


def bpe(lines):
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence(
        [normalizers.NFKD(), normalizers.StripAccents(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Whitespace(), pre_tokenizers.Punctuation(behavior="isolated"),
         pre_tokenizers.Digits(individual_digits=True)])
    trainer = trainers.BpeTrainer(vocab_size=900, special_tokens=["<unk>", "<pad>"],
                                  limit_alphabet=300)
    tok.train_from_iterator(lines, trainer)
    tok.add_special_tokens(["<|end|>"])
    tok.add_tokens(["hello world"])
    return tok


def write(name, tok, strings):
    path = os.path.join(OUT, name + ".json")
    tok.save(path, pretty=False)
    cases = []
    for s in strings:
        plain = tok.encode(s, add_special_tokens=False).ids
        special = tok.encode(s, add_special_tokens=True).ids
        cases.append({"text": s, "ids": plain, "ids_special": special,
                      "decoded": tok.decode(plain, skip_special_tokens=False),
                      "decoded_special": tok.decode(special, skip_special_tokens=False),
                      "decoded_skip": tok.decode(special, skip_special_tokens=True)})
    with open(os.path.join(OUT, name + ".cases.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer": name + ".json", "cases": cases}, f, ensure_ascii=False, indent=0)
    print(f"{name}: vocab {tok.get_vocab_size()}, {len(cases)} cases")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--text", default=os.path.join(HERE, "..", "..", "..", "shared", "text",
                                                       "tinystories_train_excerpt.txt"))
    args = parser.parse_args()
    os.makedirs(OUT, exist_ok=True)
    lines = training_lines(args.text)
    strings = HANDWRITTEN + random_strings(random.Random(13), 130)
    for name, make in [("unigram", unigram), ("wordpiece_bert", wordpiece),
                       ("wordpiece_sequences", wordpiece_sequences), ("bpe_pretokenizers", bpe)]:
        write(name, make(lines), strings)


if __name__ == "__main__":
    main()
