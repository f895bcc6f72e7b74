#!/usr/bin/env python3
"""Compares tables section by section, as merged and one-process builds must agree: every section
but PROVENANCE (and CHUNK_SUMS, which covers it). Prints one line per TABLE:
  sections equal: [...] differ: [...]
Usage: same_sections.py REFERENCE TABLE...   (engramctl from $E, else from PATH)"""
import json
import os
import subprocess
import sys


def sections(path):
    info = json.loads(subprocess.check_output([os.environ.get("E", "engramctl"), "inspect", path, "--json"]))
    data = open(path, "rb").read()
    return {s["name"]: data[s["offset"]:s["offset"] + s["size"]] for s in info["sections"]
            if s["name"] not in ("PROVENANCE", "CHUNK_SUMS")}


ref = sections(sys.argv[1])
for table in sys.argv[2:]:
    got = sections(table)
    print("sections equal:", sorted(k for k in ref if ref[k] == got.get(k)),
          "differ:", sorted(k for k in ref if ref[k] != got.get(k)))
