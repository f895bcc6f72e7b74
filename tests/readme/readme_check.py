#!/usr/bin/env python3
"""Runs every README example block and compares what it prints with what the README shows.

An example block is a fenced block without a language tag whose first line starts with "$ " and
that runs engramctl. In it, each "$ " line is a command (run by bash from the current directory, which
must look like the repository root after ./scripts/demo.sh; "engramctl" means build/bin/engramctl)
and the lines after it, up to the next "$ " line, are what it prints (stdout and stderr together).
A comment "<!-- readme-test: exit N -->" on the line before the fence says that the block's
commands exit with N (default 0); "<!-- readme-test: file PATH -->" says that the block is the
file PATH, verbatim.

Shown lines are matched in order against the printed lines:
  - a line "..." stands for any number of printed lines;
  - a line ending in "..." matches a printed line that starts with the rest;
  - any other line must equal the printed line.
Both sides are compared with runs of blanks collapsed and the numbers that vary from run to run
masked: durations, rates, core counts, peak memory, bytes read by prefetch, HTTP "created"
timestamps. A command that prints nothing shown checks only its exit status.

Usage: readme_check.py README.md    Exit 0 when every command matches; 1 with every mismatch.
"""
import re
import subprocess
import sys

MASKS = [
    (re.compile(r"\d+(\.\d+)? ?[KMGT]?i?B/s\b"), "<rate>"),
    (re.compile(r"\d+(\.\d+)? tokens per second"), "<rate> tokens per second"),
    (re.compile(r"\d+(\.\d+)? ?(ns|us|µs|ms|s|min)\b"), "<time>"),
    (re.compile(r"\(\d+(\.\d+)? cores\)"), "(<n> cores)"),
    (re.compile(r"peak RSS \d+(\.\d+)? ?[KMGT]?i?B"), "peak RSS <mem>"),
    (re.compile(r"read \d+(\.\d+)? ?[KMGT]?i?B in"), "read <bytes> in"),
    (re.compile(r'"created":\d+'), '"created":<time>'),
]


def normalise(line):
    line = " ".join(line.split())
    for pattern, repl in MASKS:
        line = pattern.sub(repl, line)
    return line


def blocks(readme):
    """Yields (line number, expected exit, [(command, [shown lines])]) per example block."""
    lines = open(readme, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        fence = lines[i]
        if not fence.startswith("```"):
            i += 1
            continue
        tag = fence[3:].strip()
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        body = lines[i + 1:j]
        m = re.match(r"<!-- readme-test: file (\S+) -->", lines[i - 1] if i else "")
        if m:
            yield i + 2, ("file", m.group(1)), body
        elif tag == "" and body and body[0].startswith("$ ") and any(x.startswith("$ engramctl") for x in body):
            want = 0
            m = re.match(r"<!-- readme-test: exit (\d+) -->", lines[i - 1] if i else "")
            if m:
                want = int(m.group(1))
            commands = []
            for line in body:
                if line.startswith("$ "):
                    commands.append((line[2:], []))
                else:
                    commands[-1][1].append(line)
            yield i + 2, want, commands
        i = j + 1


def matches(shown, printed):
    """True when the shown lines match the printed lines (both normalised)."""
    memo = {}

    def go(s, p):
        key = (s, p)
        if key in memo:
            return memo[key]
        if s == len(shown):
            ok = p == len(printed)
        elif shown[s] == "...":
            ok = any(go(s + 1, q) for q in range(p, len(printed) + 1))
        elif p == len(printed):
            ok = False
        elif shown[s].endswith("..."):
            ok = printed[p].startswith(shown[s][:-3].rstrip()) and go(s + 1, p + 1)
        else:
            ok = shown[s] == printed[p] and go(s + 1, p + 1)
        memo[key] = ok
        return ok

    return go(0, 0)


def main():
    readme = sys.argv[1]
    failures = 0
    ran = 0
    for line_no, want, commands in blocks(readme):
        if isinstance(want, tuple):
            path = want[1]
            ran += 1
            try:
                text = open(path, encoding="utf-8").read()
            except OSError as e:
                text = f"<{e}>"
            if text.rstrip("\n").split("\n") != commands:
                failures += 1
                print(f"{readme}:{line_no}: this block is not {path} as it is now")
            continue
        for command, shown in commands:
            shell = re.sub(r"^engramctl\b", "build/bin/engramctl", command)
            proc = subprocess.run(["bash", "-c", shell], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            ran += 1
            out = proc.stdout.decode("utf-8", "replace").rstrip("\n")
            printed = [normalise(x) for x in out.split("\n")] if out else []
            expected = [normalise(x) for x in shown]
            problems = []
            if proc.returncode != want:
                problems.append(f"exit status {proc.returncode}, the README implies {want}")
            if expected and not matches(expected, printed):
                problems.append("its output differs from what the README shows")
            if problems:
                failures += 1
                print(f"{readme}:{line_no}: $ {command}\n  " + "\n  ".join(problems))
                print("  --- shown (normalised)\n    " + "\n    ".join(expected))
                print("  --- printed (normalised)\n    " + "\n    ".join(printed[:60]))
    print(f"README: {ran} commands run, {failures} differ from the README")
    return 1 if failures or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
