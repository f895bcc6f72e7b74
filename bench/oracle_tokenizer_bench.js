// Hugging Face tokenizers (Node binding) encode throughput on the same lines, one thread
// (RAYON_NUM_THREADS=1): prints seconds, bytes, tokens and the ids (as a file) for comparison.
//   node oracle_tokenizer_bench.js MODULE_DIR TOKENIZER.json TEXT IDS_OUT [REPEAT]
const fs = require("fs");
const [modDir, tokPath, textPath, idsOut, repeatArg] = process.argv.slice(2);
const { Tokenizer } = require(modDir);
const tok = Tokenizer.fromFile(tokPath);
const text = fs.readFileSync(textPath, "utf8");
const lines = text.split("\n").filter((l) => l.length > 0);
(async () => {
  let best = 1e30, ids = null;
  for (let r = 0; r < Number(repeatArg || 1); ++r) {
    const t0 = process.hrtime.bigint();
    const encs = await tok.encodeBatch(lines, { addSpecialTokens: false });
    const dt = Number(process.hrtime.bigint() - t0) / 1e9;
    if (dt < best) best = dt;
    ids = encs;
  }
  let n = 0;
  for (const e of ids) n += e.getIds().length;
  const flat = new Uint32Array(n);
  let k = 0;
  for (const e of ids) for (const id of e.getIds()) flat[k++] = id;
  fs.writeFileSync(idsOut, Buffer.from(flat.buffer));
  console.log(`${best.toFixed(6)} ${Buffer.byteLength(text)} ${n}`);
})();
