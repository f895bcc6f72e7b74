# Journal corruption matrix (issue 15): committed entries are never lost silently.
# Three committed batches (early, middle, last). For each case below, on a fresh copy, every
# command (verify, inspect, lookup, export, sort-buckets, append) must refuse (exit != 0) and leave
# the file untouched — or, for a torn uncommitted tail only, drop exactly that tail — and a later
# verify never passes on a table that lost a committed entry.
#   - a flipped byte in every field of the first, a middle and the commit record of each batch;
#   - truncation at every record boundary and inside every record;
#   - forged records with a valid checksum: an impossible bucket, layer, head or order, inside a
#     batch and after the last commit;
#   - a torn tail left by a killed append: dropped by the next append, everything else kept.
source "$SRC/tests/cli/lib.sh"
tiny_table t.engram
for b in 1 2 3; do
  for i in 1 2 3 4 5; do entry "[$b,$((i + 3))]" "0.$b$i"; done > e$b.jsonl
  $E -q append t.engram --entries e$b.jsonl >/dev/null
done
for i in 1 2; do entry "[9,$((i + 3))]" "0.9"; done > new.jsonl
$PY - "$E" <<'PY'
import os, shutil, struct, subprocess, sys
import xxhash

E = sys.argv[1]
orig = open("t.engram", "rb").read()
base = struct.unpack_from("<Q", orig, 16)[0]          # header.file_size: the journal starts here
seed = struct.unpack_from("<Q", orig, 40)[0]          # header_checksum seeds record checksums

# Walk the records: (offset, size, type).
recs, pos = [], base
while pos < len(orig):
    psize = struct.unpack_from("<I", orig, pos + 16)[0]
    size = 32 + (psize + 7) // 8 * 8
    recs.append((pos, size, struct.unpack_from("<I", orig, pos + 4)[0]))
    pos += size
commits = [i for i, r in enumerate(recs) if r[2] == 2]
assert len(commits) == 3, commits

def committed_entries(path):
    out = subprocess.run([E, "inspect", path, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        return None
    import json
    return json.loads(out.stdout)["journal"]["entries"]

COMMANDS = [
    ["verify", "c.engram"],
    ["inspect", "c.engram"],
    ["lookup", "c.engram", "--canonical-ids", "1,4"],
    ["export", "c.engram", "-o", "x.safetensors"],
    ["sort-buckets", "c.engram"],
    ["append", "c.engram", "--entries", "new.jsonl"],
]
cases = failures = 0

def expect_refusal(data, label):
    global cases, failures
    cases += 1
    for cmd in COMMANDS:
        open("c.engram", "wb").write(data)
        r = subprocess.run([E] + cmd, capture_output=True, text=True)
        after = open("c.engram", "rb").read()
        msg = None
        if r.returncode == 0:
            msg = "exited 0"
        elif after != data:
            msg = "changed the file"
        elif cmd[0] != "verify" and "restore the table" not in r.stderr and "incomplete" not in r.stderr:
            msg = "did not say why: " + r.stderr.strip()[:200]
        # (verify itself is the first command: on an unchanged file it has already refused)
        if msg and subprocess.run([E, "-q", "verify", "c.engram"], capture_output=True).returncode == 0:
            msg += " and verify passes afterwards"
        if msg:
            failures += 1
            if failures <= 10:
                print(f"FAIL {label}: {cmd[0]} {msg}")

def flip(data, off):
    b = bytearray(data); b[off] ^= 0x10; return bytes(b)

# 1. Flipped bytes: every field of the first entry, a middle entry and the commit of each batch.
first = 0
entry_fields = [0, 4, 8, 16, 20, 24, 32, 36, 40, 44, 48, 56, 60, 64, 72]
commit_fields = [0, 4, 8, 16, 20, 24, 32, 40, 48, 56]
for k, c in enumerate(commits):
    picks = [first, (first + c) // 2, c]
    for i in picks:
        off, size, typ = recs[i]
        for f in (commit_fields if typ == 2 else entry_fields):
            if f < size:
                expect_refusal(flip(orig, off + f), f"batch {k} record {i} byte {f}")
    first = c + 1

# 2. Truncation at every record boundary (the last one is the intact file) and inside records.
for i, (off, size, typ) in enumerate(recs):
    expect_refusal(orig[:off], f"cut at record {i}")
    expect_refusal(orig[:off + size // 2], f"cut inside record {i}")

# 3. Forged records whose checksum holds.
def forge(rec_off, patch):
    b = bytearray(orig)
    psize = struct.unpack_from("<I", b, rec_off + 16)[0]
    patch(b, rec_off)
    struct.pack_into("<Q", b, rec_off + 24, 0)
    s = xxhash.xxh3_64_intdigest(bytes(b[rec_off:rec_off + 32 + psize]), seed=seed)
    struct.pack_into("<Q", b, rec_off + 24, s)
    return bytes(b)
mid = recs[commits[0] + 2][0]
for name, fo, val, fmt in [("bucket", 48, 1 << 40, "<Q"), ("layer", 32, 7, "<I"),
                           ("head", 40, 9, "<I"), ("order", 36, 9, "<I")]:
    expect_refusal(forge(mid, lambda b, o: struct.pack_into(fmt, b, o + fo, val)), f"forged {name}")
# A forged entry after the last commit, with the next seq: not a torn write either.
last_entry = bytearray(orig[recs[0][0]:recs[0][0] + recs[0][1]])
struct.pack_into("<Q", last_entry, 8, len(recs))
struct.pack_into("<Q", last_entry, 48, 1 << 40)
struct.pack_into("<Q", last_entry, 24, 0)
psize = struct.unpack_from("<I", last_entry, 16)[0]
struct.pack_into("<Q", last_entry, 24, xxhash.xxh3_64_intdigest(bytes(last_entry[:32 + psize]), seed=seed))
expect_refusal(orig + bytes(last_entry), "forged record after the last commit")

# 4. A torn tail from a killed append is the one thing dropped: exactly it, nothing else.
open("c.engram", "wb").write(orig)
env = dict(os.environ, ENGRAM_CRASH_AT="append-torn")
r = subprocess.run([E, "append", "c.engram", "--entries", "new.jsonl"], env=env, capture_output=True)
torn = open("c.engram", "rb").read()
assert r.returncode != 0 and len(torn) > len(orig) and torn[:len(orig)] == orig, r.returncode
assert committed_entries("c.engram") == 30
r = subprocess.run([E, "append", "c.engram", "--entries", "new.jsonl"], capture_output=True, text=True)
assert r.returncode == 0 and "dropping an uncommitted journal tail" in r.stderr, r.stderr
after = open("c.engram", "rb").read()
# Everything but the commit slot page (§5.6) is as before, then the new batch.
assert after[base:len(orig)] == orig[base:] and committed_entries("c.engram") == 34
assert subprocess.run([E, "-q", "verify", "c.engram"], capture_output=True).returncode == 0

print(f"{cases} damaged or cut copies, each refused by {len(COMMANDS)} commands: {failures} failures")
print("torn tail: dropped exactly, 30 committed entries kept, 4 appended")
PY
