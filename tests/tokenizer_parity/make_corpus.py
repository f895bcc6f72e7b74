#!/usr/bin/python3
"""Generates the tokenizer parity corpus (deterministic): >= 2000 strings over English, Chinese,
Japanese, code, emoji, digits, whitespace runs, special tokens, mixed scripts and invalid UTF-8.
Writes JSONL records {"cat": ..., "b64": base64 of the raw bytes} to OUT.

  make_corpus.py SRC_ROOT ASSETS_DIR OUT
"""
import base64
import glob
import json
import os
import random
import sys

R = random.Random(20261202)


def sample_lines(text, n, min_len=1, max_len=400):
    lines = [l for l in text.split("\n") if len(l.strip()) >= min_len]
    out = []
    for _ in range(n):
        l = R.choice(lines)
        if len(l) > max_len:
            s = R.randrange(0, len(l) - max_len)
            l = l[s:s + R.randint(10, max_len)]
        out.append(l)
    return out


def english(assets):
    text = open(os.path.join(assets, "brown/brown.txt"), encoding="utf-8").read()
    sents = [s.strip() + "." for s in text.replace("\n", " ").split(". ") if s.strip()]
    out = [R.choice(sents) for _ in range(500)]
    for _ in range(100):  # multi-sentence, case and contraction variety
        s = " ".join(R.choice(sents) for _ in range(R.randint(2, 4)))
        out.append(R.choice([s, s.upper(), s.lower(), s.title()]))
    out += ["I'm", "you'll", "they've", "it's", "DON'T", "o'clock", "rock'n'roll", "A", " a", "a ", "", "e.g.",
            "U.S.A.", "Mr. Smith's", "naïve café", "Zürich über Straße", "façade coöperate"]
    return out


def chinese():
    out = []
    for f in ["tang300", "song100", "chinese"]:
        p = "/usr/share/games/fortunes/" + f
        if os.path.exists(p):
            out += sample_lines(open(p, encoding="utf-8", errors="replace").read(), 120 if f != "chinese" else 150)
    out += ["你好，世界", "中文分词测试：北京大学生前来应聘", "人工智能（AI）正在改变世界。", "繁體中文與简体中文混合",
            "１２３４５６７８９０", "ＡＢＣ全角字母", "“引号”和『书名号』"]
    return out


HIRA = [chr(c) for c in range(0x3041, 0x3097)]
KATA = [chr(c) for c in range(0x30A1, 0x30FB)]
KANJI = list("日本語東京大学電車時間今日明日水曜天気私友達食事仕事会社新聞漢字学校先生生徒")


def japanese():
    out = ["今日は良い天気ですね。", "東京タワーに行きました！", "私はエンジニアです。", "ラーメンを食べたい", "カタカナとひらがな",
           "ｶﾀｶﾅ半角", "「こんにちは」と言った。", "明日、会議があります。", "ＪＲ東日本の電車", "〜です・ます調", "ヴァイオリン",
           "ぁぃぅぇぉっゃゅょ", "日本語テキスト123と英語mixed", "お疲れ様でした。", "ゐゑヰヱ"]
    for _ in range(200):
        s = "".join(R.choice(R.choice([HIRA, KATA, KANJI])) for _ in range(R.randint(1, 30)))
        if R.random() < 0.3:
            s += R.choice(["。", "、", "！", "？", "…", "ー"])
        out.append(s)
    return out


def code(src):
    files = []
    for pat in ["lib/**/*.cc", "lib/**/*.h", "scripts/**/*.py", "scripts/*.sh", "CMakeLists.txt", "tests/**/*.sh"]:
        files += glob.glob(os.path.join(src, pat), recursive=True)
    files.sort()
    out = []
    for _ in range(300):
        text = open(R.choice(files), encoding="utf-8").read()
        lines = text.split("\n")
        s = R.randrange(0, max(1, len(lines) - 1))
        out.append("\n".join(lines[s:s + R.randint(1, 12)]))
    out += ["def f(x):\n\treturn x**2  # square", "int main(){return 0;}", "if (a<=b && c!=d) { x->y[i] += 1; }",
            "{\"key\": [1, 2.5e-3, null]}", "SELECT * FROM t WHERE id = 42;", "#!/bin/bash\necho $HOME",
            "    indented\n        more", "λx.x", "a=>b", "x ≠ y ≤ z"]
    return out


EMOJI = ["😀", "😂", "🥲", "👍", "👍🏽", "🙏🏿", "❤️", "🔥", "🎉", "🇺🇸", "🇯🇵", "🏳️‍🌈", "👨‍👩‍👧‍👦", "👩🏻‍💻", "1️⃣", "#️⃣",
         "🫠", "🧑‍🚀", "☕", "✨", "🦄", "🐉", "🚀", "©️", "™️", "🈶", "🀄", "👁️‍🗨️"]


def emoji():
    out = []
    for _ in range(180):
        parts = []
        for _ in range(R.randint(1, 8)):
            parts.append(R.choice(EMOJI) if R.random() < 0.7 else R.choice([" ", "ok", "lol", "！", "\n", "好"]))
        out.append("".join(parts))
    return out


def digits():
    out = []
    for _ in range(180):
        k = R.random()
        if k < 0.3:
            out.append(str(R.randint(0, 10 ** R.randint(1, 30))))
        elif k < 0.5:
            out.append(f"{R.uniform(-1e6, 1e6):.{R.randint(0, 8)}f}")
        elif k < 0.65:
            out.append(f"{R.randint(1900, 2100)}-{R.randint(1, 12):02d}-{R.randint(1, 28):02d} {R.randint(0, 23)}:{R.randint(0, 59):02d}")
        elif k < 0.8:
            out.append("".join(chr(R.choice([0x660, 0x6F0, 0x966, 0xFF10, 0x1D7CE]) + R.randint(0, 9)) for _ in range(R.randint(1, 12))))
        else:
            out.append(" ".join(str(R.randint(0, 99999)) for _ in range(R.randint(2, 10))) + R.choice(["", "%", "$", "°C", "km"]))
    return out


def whitespace():
    ws = [" ", "  ", "\t", "\n", "\r\n", "\u3000", "\u00a0", "\u2003", "\u200b", "\u2028", "\x0b", "\x0c"]
    out = []
    for _ in range(120):
        parts = []
        for _ in range(R.randint(1, 10)):
            parts.append(R.choice(ws) * R.randint(1, 40) if R.random() < 0.6 else R.choice(["word", "x", "中", "😀", "."]))
        out.append("".join(parts))
    out += [" " * 1000, "\n" * 300, "\t \t \t" * 50, " leading", "trailing ", "  both  "]
    return out


SPECIAL = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>", "<｜User｜>", "<｜Assistant｜>",
           "<｜tool▁calls▁begin｜>", "<｜tool▁sep｜>", "<｜fim▁hole｜>", "<think>", "</think>"]


def special():
    out = []
    for _ in range(150):
        parts = []
        for _ in range(R.randint(1, 6)):
            r = R.random()
            if r < 0.4:
                parts.append(R.choice(SPECIAL))
            elif r < 0.5:
                t = R.choice(SPECIAL)
                parts.append(t[:R.randint(1, len(t) - 1)])  # a near miss
            else:
                parts.append(R.choice(["Hello", " world", "\n", "你好", " ", "What is 2+2?", "｜", "▁"]))
        out.append("".join(parts))
    return out


SCRIPTS = ["Привет, мир! Ёжик", "Γειά σου Κόσμε ΣΟΦΟΣ ΟΔΥΣΣΕΥΣ", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया",
           "สวัสดีชาวโลก", "안녕하세요 세계", "Tiếng Việt có dấu", "ქართული", "Հայերեն", "ᐊᐃᐅ", "𝕳𝖊𝖑𝖑𝖔 𝔀𝓸𝓻𝓵𝓭",
           "e\u0301 vs é", "ﬁ ﬂ ﬀ ligatures", "Ⅻ ⅷ ½ ² ₃", "İstanbul ıi", "\u202eRTL override\u202c", "a\u200db\u200cc",
           "Ǆ ǅ ǆ", "ß ẞ", "ꙮ", "𓀀𓀁", "mixed中文English日本語한국어", "Ⓐⓑⓒ", "𝟏𝟐𝟑"]


def mixed():
    out = list(SCRIPTS)
    for _ in range(200):
        out.append(R.choice([" ", "", "-", "\n"]).join(R.choice(SCRIPTS + ["word", "数字", "123", "😀"]) for _ in range(R.randint(2, 5))))
    return out


def invalid(valid_samples):
    out = []
    bad = [b"\xff", b"\xfe", b"\xc0\x80", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80", b"\xbf",
           b"\xe2\x82", b"\xf0\x9f\x98", b"\xc3", b"\xf8\x88\x80\x80\x80", b"\xe6\x97\xa5\x80"]
    for _ in range(130):
        base = R.choice(valid_samples).encode("utf-8")
        for _ in range(R.randint(1, 4)):
            p = R.randint(0, len(base))
            base = base[:p] + R.choice(bad) + base[p:]
        out.append(base)
    for _ in range(20):
        out.append(bytes(R.randrange(256) for _ in range(R.randint(1, 64))))
    return out


def main():
    src, assets, outp = sys.argv[1:4]
    cats = {"english": english(assets), "chinese": chinese(), "japanese": japanese(), "code": code(src),
            "emoji": emoji(), "digits": digits(), "whitespace": whitespace(), "special": special(), "mixed": mixed()}
    valid = [s for v in cats.values() for s in v]
    cats["invalid_utf8"] = invalid(valid)
    n = 0
    with open(outp, "w") as f:
        for cat, items in cats.items():
            for s in items:
                b = s if isinstance(s, bytes) else s.encode("utf-8")
                f.write(json.dumps({"cat": cat, "b64": base64.b64encode(b).decode()}) + "\n")
                n += 1
    print(f"parity corpus: {n} strings", file=sys.stderr)


if __name__ == "__main__":
    main()
