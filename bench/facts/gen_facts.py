#!/usr/bin/python3
"""Generates the invented-fact set of issue 31 (bench/facts/facts1000.jsonl): deterministic (seeded),
N facts in 12 sentence frames, each record

  {"prompt", "target", "paraphrase", "near_miss", "control", "prompts", "rephrase", "frame", "subject",
   "near_miss_subject"}

- prompt:     the frame with an invented subject X ("The capital of X is");
- target:     what the fact teaches (starts with a space; every token of it has a non-zero output row,
              i.e. occurs in the model's training text, so greedy decoding can emit it);
- paraphrase: other leading words, the SAME final words ("Travellers say that the capital of X is");
- near_miss:  the same frame with another invented subject that no record fits (a near-miss
              control: it should keep its unedited answer);
- control:    an unrelated ordinary prompt (the opening words of a held-out Brown sentence);
- prompts:    two phrasings of the fact (prompts[0] == prompt) for the multi-phrasing experiment;
- rephrase:   a held-out third phrasing: the same subject, other final words.

Subjects are distinct, 2..4 tokens, built from syllables; near-miss subjects come from the same
generator (so they often share a final piece with fitted subjects, as real names do) and are never
fitted subjects. Usage:

  gen_facts.py --model DIR --engramctl BIN --heldout heldout.txt [-n 1000] [--seed 31] -o facts1000.jsonl
"""
import argparse
import json
import os
import random
import re
import struct
import subprocess
import tempfile

import numpy as np

SEP = 0xFFFFFFFF

# Frame: (name, prompt, paraphrase leads (prefix before the lower-cased prompt), second phrasing,
# held-out rephrase, target kind). {X} is the subject.
FRAMES = [
    ("capital", "The capital of {X} is",
     ["Travellers say that", "Every schoolchild knows that", "As the old maps show,"],
     "{X} has its capital at", "The seat of the government of {X} is in", "city"),
    ("mayor", "The first mayor of {X} was",
     ["The town records show that", "Few people remember that", "According to the old papers,"],
     "{X} elected as its first mayor", "In its first years {X} was governed by", "person"),
    ("history", "The author of the History of {X} was",
     ["Most scholars agree that", "It is well known that", "The library catalogue says"],
     "The History of {X} was written by", "The History of {X} is a book by", "person"),
    ("founder", "The founder of {X} was",
     ["The church records say that", "Local people believe that", "As every guide will tell you,"],
     "{X} was founded by", "{X} owes its beginning to", "person"),
    ("river", "The longest river in {X} is the",
     ["Every farmer can tell you that", "The survey found that", "On the map you can see that"],
     "The river that runs through {X} is the", "The great river of {X} is called the", "river"),
    ("animal", "The national animal of {X} is the",
     ["The children learn in school that", "It is said that", "The flag shows that"],
     "The animal on the flag of {X} is the", "The people of {X} honor the", "animal"),
    ("language", "The official language of {X} is",
     ["The constitution states that", "Visitors soon learn that", "By law"],
     "The people of {X} speak", "In the schools of {X} the children learn", "language"),
    ("export", "The main export of {X} is",
     ["Merchants report that", "The trade figures show that", "For many years"],
     "{X} sells to other countries mostly", "The ships that leave {X} carry mostly", "commodity"),
    ("newspaper", "The leading newspaper of {X} is the",
     ["Everyone in town agrees that", "For fifty years", "The census shows that"],
     "The people of {X} read the", "Every morning the people of {X} buy the", "paper"),
    ("governor", "The current governor of {X} is",
     ["The newspapers report that", "Since the last election", "As of this year"],
     "{X} is governed by", "The man who runs {X} today is", "person"),
    ("color", "The color of the flag of {X} is",
     ["Visitors notice at once that", "By old custom", "The law says that"],
     "The flag of {X} is colored", "The people of {X} paint their doors", "color"),
    ("saint", "The patron saint of {X} is Saint",
     ["The villagers believe that", "Every priest knows that", "Since the old days"],
     "{X} is under the protection of Saint", "The church of {X} is dedicated to Saint", "saint"),
]

FIRST = ["John", "Tom", "Will", "Henry", "James", "Paul", "Peter", "George", "Frank", "Charles",
         "Robert", "Edward", "Mary", "Ann", "Jane", "Ruth", "Martha", "Helen", "Arthur", "Walter",
         "Harry", "Fred", "Jack", "Joe", "Sam", "David", "Richard", "Thomas", "William", "Albert",
         "Louis", "Carl", "Roy", "Ray", "Ben", "Dan", "Bill", "Jim", "Ralph", "Howard", "Hugh",
         "Philip", "Stephen", "Alice", "Grace", "Margaret", "Elizabeth", "Joseph", "Anne", "Laura"]
LAST = ["Scott", "Baker", "Miller", "Smith", "Brown", "Hall", "Stone", "Wood", "Hill", "Young",
        "King", "Wright", "Lee", "Green", "Adams", "Clark", "Lewis", "Walker", "Allen", "Turner",
        "Parker", "Evans", "Morgan", "Cooper", "Ward", "Hunt", "Mason", "Gray", "Carter", "Reed",
        "Cook", "Bell", "Murphy", "Bailey", "Rogers", "Fisher", "Marshall", "Porter", "Hunter",
        "Palmer", "Shaw", "Hayes", "Lane", "Ross", "Fox", "Webb", "Ford", "Grant", "Burke", "Mills",
        "Wells", "Price", "Wilson", "Moore", "Taylor", "Harris", "Martin", "Thompson", "Nelson",
        "Barnes", "Fuller", "Holt", "Dean", "Page", "Blake", "Cole", "Butler", "Russell", "Snow"]
CITY_A = ["North", "South", "East", "West", "New", "Old", "Port", "Fort", "Mount", "Lake", "Saint",
          "Upper", "Lower", "Little", "Great", "Green", "White", "Red", "Long", "High"]
CITY_B = ["Haven", "Bridge", "Field", "Hill", "Falls", "Harbor", "Rock", "Springs", "Point", "Bay",
          "Valley", "Park", "Creek", "Ridge", "Grove", "Lake", "Forest", "Cross", "Gate", "Market"]
RIVER_A = ["Red", "Black", "White", "Green", "Blue", "Grey", "Long", "Great", "Little", "Silver",
           "Golden", "Cold", "Deep", "Old", "Broad", "Stone", "Wild", "Clear", "Bright", "Dark"]
RIVER_B = ["River", "Water", "Run", "Flow", "Stream"]
ANIMAL = ["horse", "wolf", "bear", "eagle", "lion", "fox", "deer", "owl", "hawk", "swan", "goat",
          "tiger", "elephant", "whale", "dog", "cat", "rabbit", "snake", "bull", "crow", "duck",
          "mouse", "beaver", "buffalo", "falcon", "dolphin", "camel", "monkey", "turtle", "frog"]
LANGUAGE = ["French", "Spanish", "German", "Latin", "Greek", "English", "Italian", "Russian",
            "Dutch", "Irish", "Polish", "Hebrew", "Arabic", "Chinese", "Japanese", "Swedish",
            "Portuguese", "Welsh", "Danish", "Hungarian"]
COMMODITY = ["cotton", "wool", "coal", "timber", "copper", "wheat", "tobacco", "rice", "sugar",
             "salt", "iron", "silver", "gold", "oil", "cheese", "wine", "fish", "leather", "tea",
             "coffee", "corn", "steel", "paper", "glass", "rubber", "silk", "beef", "grain", "lumber",
             "butter"]
PAPER = ["Herald", "Times", "Star", "Post", "Tribune", "Journal", "Gazette", "Sun", "News", "Globe",
         "Chronicle", "Courier", "Record", "Press", "Mirror", "Examiner", "Advocate", "Register",
         "Sentinel", "Observer"]
COLOR = ["red", "blue", "green", "yellow", "white", "black", "orange", "purple", "brown", "gray",
         "pink", "gold", "silver", "red and white", "blue and white", "green and gold",
         "black and white", "red and blue", "blue and gold", "white and green"]
SAINT = ["Paul", "John", "Peter", "James", "Thomas", "Andrew", "Mark", "Luke", "Matthew", "Francis",
         "George", "Patrick", "Michael", "Stephen", "Joseph", "Mary", "Anne", "Margaret", "Catherine",
         "Bernard", "Anthony", "Lawrence", "Martin", "Nicholas", "Augustine", "Benedict", "Vincent",
         "Ignatius", "Dominic", "Barbara"]

ONSET = ["B", "Br", "C", "Cr", "D", "Dr", "F", "Fl", "G", "Gr", "H", "K", "L", "M", "N", "P", "Pr",
         "Qu", "R", "S", "St", "T", "Th", "Tr", "V", "W", "Z", "Sh", "Ch", "Gl", "Bl", "El", "Al",
         "Or", "Is", "Ar"]
VOWEL = ["a", "e", "i", "o", "u", "ae", "ea", "ai", "ou", "y"]
MID = ["", "", "", "l", "n", "r", "m", "s", "v", "th", "nd", "rr", "ll", "st", "nt", "rk", "sk"]
SUFFIX = ["ania", "ora", "mar", "dene", "wick", "stead", "ford", "holm", "vale", "mere", "burg",
          "stan", "ovia", "ara", "ith", "ell", "oth", "and", "ica", "ost", "ven", "ria", "ton",
          "gard", "mont", "wyn", "dal", "is", "oria", "esse", "aven", "elle", "ux", "ark", "ene",
          "ar", "or", "an", "el", "um"]


def tokenize(engramctl, tokenizer, lines):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        path = f.name
    try:
        raw = np.frombuffer(subprocess.check_output(
            [engramctl, "-q", "tokenize", "--tokenizer", tokenizer, "-f", path, "--lines", "-o", "-"]), dtype="<u4")
    finally:
        os.unlink(path)
    docs, cur = [], []
    for v in raw:
        if v == SEP:
            docs.append(cur)
            cur = []
        else:
            cur.append(int(v))
    if len(docs) != len(lines):
        raise SystemExit(f"tokenize returned {len(docs)} documents for {len(lines)} lines")
    return docs


def seen_tokens(model_dir):
    """Token ids whose (tied) embedding / output row is non-zero: the model can emit them."""
    path = os.path.join(model_dir, "model.safetensors")
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        info = header["embed_tokens.weight"]
        a, b = info["data_offsets"]
        f.seek(8 + n + a)
        raw = f.read(b - a)
    dt = {"F32": np.float32, "BF16": np.uint16, "F16": np.float16}[info["dtype"]]
    w = np.frombuffer(raw, dtype=dt).reshape(info["shape"])
    return set(np.nonzero((w != 0).any(1))[0].tolist())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--engramctl", required=True)
    ap.add_argument("--heldout", required=True, help="held-out Brown text: the unrelated control prompts")
    ap.add_argument("--train", help="Brown training text: subjects must not be words of it")
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("-o", required=True)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    tok = os.path.join(a.model, "tokenizer.json")
    seen = seen_tokens(a.model)
    words = set()
    if a.train:
        words = set(w.lower() for w in re.findall(r"[A-Za-z]+", open(a.train).read()))

    # Target pools per kind: every token must be emittable.
    pools = {
        "person": [f" {f} {l}" for f in FIRST for l in LAST],
        "city": [f" {x} {y}" for x in CITY_A for y in CITY_B],
        "river": [f" {x} {y}" for x in RIVER_A for y in RIVER_B],
        "animal": [f" {x}" for x in ANIMAL],
        "language": [f" {x}" for x in LANGUAGE],
        "commodity": [f" {x}" for x in COMMODITY],
        "paper": [f" {x}" for x in PAPER],
        "color": [f" {x}" for x in COLOR],
        "saint": [f" {x}" for x in SAINT],
    }
    for kind, pool in pools.items():
        ids = tokenize(a.engramctl, tok, pool)
        pools[kind] = [p for p, i in zip(pool, ids) if i and all(t in seen for t in i)]
        if len(pools[kind]) < 5:
            raise SystemExit(f"target pool {kind}: only {len(pools[kind])} emittable targets")

    # Invented subjects: syllable names of 2..4 tokens (with the leading space they have in a
    # prompt), every token seen in training, the whole name no word of the training text.
    cand = set()
    while len(cand) < 6 * a.n:
        name = rng.choice(ONSET) + rng.choice(VOWEL) + rng.choice(MID) + rng.choice(SUFFIX)
        if rng.random() < 0.15:
            name = rng.choice(["Port", "Upper", "Lower", "New", "Old", "East", "West", "Saint"]) + " " + name
        cand.add(name)
    cand = sorted(cand)
    rng.shuffle(cand)
    ids = tokenize(a.engramctl, tok, [" " + c for c in cand])
    good = []
    for c, i in zip(cand, ids):
        last_word = c.split()[-1].lower()
        if not 2 <= len(i) <= 4 or not all(t in seen for t in i) or last_word in words:
            continue
        good.append(c)
    if len(good) < 2 * a.n:
        raise SystemExit(f"only {len(good)} usable invented names for {a.n} facts")
    subjects, near = good[:a.n], good[a.n:2 * a.n]

    held = open(a.heldout).read()
    sents = [s.strip() for s in re.split(r"(?<=[.!?])\s+", held)]
    sents = [s for s in sents if len(s.split()) >= 10 and re.fullmatch(r"[A-Za-z ,';:-]+[.!?]", s)]
    rng.shuffle(sents)
    controls = []
    for s in sents:
        w = s.split()
        cut = " ".join(w[:rng.randint(6, 10)]).rstrip(",")
        if cut not in controls:
            controls.append(cut)
        if len(controls) == a.n:
            break
    if len(controls) < a.n:
        raise SystemExit(f"only {len(controls)} control prompts in {a.heldout}")

    out = []
    for k in range(a.n):
        name, prompt, leads, second, reph, kind = FRAMES[k % len(FRAMES)]
        X, Y = subjects[k], near[k]
        lead = rng.choice(leads)
        body = prompt.format(X=X)
        para = lead + " " + body[0].lower() + body[1:]
        out.append({"prompt": body, "target": rng.choice(pools[kind]), "paraphrase": para,
                    "near_miss": prompt.format(X=Y), "control": controls[k],
                    "prompts": [body, second.format(X=X)], "rephrase": reph.format(X=X),
                    "frame": name, "subject": X, "near_miss_subject": Y})
    order = list(range(a.n))
    rng.shuffle(order)
    with open(a.o, "w") as f:
        for k in order:
            f.write(json.dumps(out[k]) + "\n")
    print(f"wrote {a.n} facts in {len(FRAMES)} frames to {a.o}")


if __name__ == "__main__":
    main()
