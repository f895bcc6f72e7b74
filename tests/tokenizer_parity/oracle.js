// The parity oracle: Hugging Face tokenizers (Node binding) over a corpus from make_corpus.py.
//   node oracle.js MODULE_DIR TOKENIZER.json CORPUS.jsonl OUT.jsonl        ids + decoded text
//   node oracle.js MODULE_DIR TOKENIZER.json --canonical OUT.json          canonical-id map
// Bytes are turned into a JS string with Buffer.toString('utf8') (WHATWG decoding: each maximal
// ill-formed subsequence becomes U+FFFD), which is what reaches tokenizers from any host language.
const fs = require("fs");
const [modDir, tokPath, corpus, out] = process.argv.slice(2);
const tk = require(modDir);
const tok = tk.Tokenizer.fromFile(tokPath);

async function parity() {
  const lines = fs.readFileSync(corpus, "utf8").split("\n").filter((l) => l);
  const res = [];
  for (const l of lines) {
    const rec = JSON.parse(l);
    const text = Buffer.from(rec.b64, "base64").toString("utf8");
    const e1 = await tok.encode(text, null, { addSpecialTokens: false });
    const e2 = await tok.encode(text, null, { addSpecialTokens: true });
    const ids = Array.from(e1.getIds());
    const decoded = await tok.decode(ids, false);
    const decodedSkip = await tok.decode(ids, true);
    res.push(JSON.stringify({
      ids, ids_special: Array.from(e2.getIds()),
      decoded: Buffer.from(decoded, "utf8").toString("base64"),
      decoded_skip: Buffer.from(decodedSkip, "utf8").toString("base64"),
    }));
  }
  fs.writeFileSync(out, res.join("\n") + "\n");
}

// DESIGN §2's normaliser chain built from the oracle's own normalizers (independent of ours).
async function canonical() {
  const norm = tk.sequenceNormalizer([tk.nfkcNormalizer(), tk.nfdNormalizer(), tk.stripAccentsNormalizer(),
                                      tk.lowercase()]);
  const strip = tk.stripNormalizer(true, true);
  const SENT = "\uE000";
  const size = tok.getVocabSize(true);
  let maxId = 0;
  for (const id of Object.values(tok.getVocab(true))) maxId = Math.max(maxId, id);
  const n = Math.max(size, maxId + 1);
  const keyToId = new Map();
  const map = new Array(n);
  for (let id = 0; id < n; ++id) {
    const text = await tok.decode([id], false);
    let key;
    if (text.includes("\uFFFD")) {
      key = tok.idToToken(id) ?? "";
    } else {
      let s = norm.normalizeString(text);
      s = s.replace(/[ \t\r\n]+/g, " ");
      if (s === " ") s = SENT;
      s = strip.normalizeString(s).split(SENT).join(" ");
      key = s ? s : text;
    }
    if (!keyToId.has(key)) keyToId.set(key, keyToId.size);
    map[id] = keyToId.get(key);
  }
  fs.writeFileSync(out, JSON.stringify(map));
}

(corpus === "--canonical" ? canonical() : parity()).catch((e) => { console.error(e); process.exit(1); });
