#!/usr/bin/env python3
"""Runs the example blocks of the README (and of the pages it sends readers to) and compares what
they print with what the pages show.

The files are read in the order given (README.md first), and their commands run in that order, from
the current directory, which must look like the repository root after ./scripts/demo.sh.

An example block is a fenced block without a language tag whose first line starts with "$ " and
that runs engramctl. In it, each "$ " line is a command and the lines after it, up to the next "$ "
line, are what it prints (stdout and stderr together). Comments on the line before a fence:
  <!-- readme-test: exit N -->  the block's commands exit with N (default 0);
  <!-- readme-test: file PATH --> the block is the file PATH, verbatim;
  <!-- readme-test: path -->     the block is the set-up that puts engramctl on PATH, as the reader is
                                 told to type it. Every command runs in bash after these lines, and
                                 nothing else puts engramctl on PATH: directories holding an
                                 engramctl are removed from the inherited PATH, and the set-up must
                                 make "engramctl" resolve to ./build/bin/engramctl, so an example
                                 that would fail with "command not found" for a reader fails here.

Shown lines are matched in order against the printed lines:
  - a line "..." stands for any number of printed lines;
  - a line ending in "..." matches a printed line that starts with the rest;
  - any other line must equal the printed line.
Both sides are compared with runs of blanks collapsed and the numbers that vary from run to run
masked: durations, rates, core counts, peak memory, bytes read by prefetch, HTTP "created"
timestamps. A command that prints nothing shown checks only its exit status.

Relative Markdown links ([text](path#anchor)) must name an existing file and, where an anchor is
given for a .md file, one of its headings.

Usage: readme_check.py README.md [docs/commands.md ...]
Exit 0 when every command matches and every link resolves; 1 otherwise, with every mismatch listed.
"""
import os
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
ENGRAMCTL = "build/bin/engramctl"


def normalise(line):
    line = " ".join(line.split())
    for pattern, repl in MASKS:
        line = pattern.sub(repl, line)
    return line


def blocks(path):
    """Yields (line number, kind, payload) per annotated or example block of one Markdown file:
    ("file", PATH, body lines), ("path", None, body lines), or ("example", exit, [(command, shown)])."""
    lines = open(path, encoding="utf-8").read().split("\n")
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
        before = lines[i - 1] if i else ""
        m = re.match(r"<!-- readme-test: file (\S+) -->", before)
        if m:
            yield i + 2, "file", m.group(1), body
        elif re.match(r"<!-- readme-test: path -->", before):
            yield i + 2, "path", None, body
        elif tag == "" and body and body[0].startswith("$ ") and any(x.startswith("$ engramctl") for x in body):
            want = 0
            m = re.match(r"<!-- readme-test: exit (\d+) -->", before)
            if m:
                want = int(m.group(1))
            commands = []
            for line in body:
                if line.startswith("$ "):
                    commands.append((line[2:], []))
                else:
                    commands[-1][1].append(line)
            yield i + 2, "example", want, commands
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


def slug(heading):
    """GitHub's anchor for a Markdown heading."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def broken_links(path):
    """Relative links of one Markdown file that name no file, or no heading of it."""
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    problems = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(full):
            problems.append(f"{path}: link {target}: {full} does not exist")
        elif anchor and full.endswith(".md"):
            headings = re.findall(r"^#+ (.*)$", open(full, encoding="utf-8").read(), flags=re.M)
            if anchor not in [slug(h) for h in headings]:
                problems.append(f"{path}: link {target}: {full} has no heading with that anchor")
    return problems


def clean_env():
    """The environment with every PATH directory that holds an engramctl removed."""
    env = dict(os.environ)
    dirs = [d for d in env.get("PATH", "").split(":")
            if d and not os.path.exists(os.path.join(d, "engramctl"))]
    env["PATH"] = ":".join(dirs)
    return env


def main():
    files = sys.argv[1:]
    env = clean_env()
    setup = None
    failures = 0
    ran = 0
    for path in files:
        for problem in broken_links(path):
            failures += 1
            print(problem)
        file_ran = file_failures = 0
        for line_no, kind, want, body in blocks(path):
            if kind == "path":
                setup = "\n".join(body)
                proc = subprocess.run(["bash", "-c", setup + "\ncommand -v engramctl"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                found = proc.stdout.decode("utf-8", "replace").strip()
                if proc.returncode != 0 or not found or not os.path.exists(found) or \
                        not os.path.exists(ENGRAMCTL) or not os.path.samefile(found, ENGRAMCTL):
                    file_failures += 1
                    print(f"{path}:{line_no}: after this set-up, engramctl is '{found}', "
                          f"not ./{ENGRAMCTL}")
                continue
            if kind == "file":
                file_ran += 1
                try:
                    text = open(want, encoding="utf-8").read()
                except OSError as e:
                    text = f"<{e}>"
                if text.rstrip("\n").split("\n") != body:
                    file_failures += 1
                    print(f"{path}:{line_no}: this block is not {want} as it is now")
                continue
            if setup is None:
                file_failures += 1
                print(f"{path}:{line_no}: no '<!-- readme-test: path -->' block before this example "
                      "says how engramctl gets on PATH")
                setup = ""
            for command, shown in body:
                proc = subprocess.run(["bash", "-c", setup + "\n" + command], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                file_ran += 1
                out = proc.stdout.decode("utf-8", "replace").rstrip("\n")
                printed = [normalise(x) for x in out.split("\n")] if out else []
                expected = [normalise(x) for x in shown]
                problems = []
                if proc.returncode != want:
                    problems.append(f"exit status {proc.returncode}, the page implies {want}")
                if expected and not matches(expected, printed):
                    problems.append("its output differs from what the page shows")
                if problems:
                    file_failures += 1
                    print(f"{path}:{line_no}: $ {command}\n  " + "\n  ".join(problems))
                    print("  --- shown (normalised)\n    " + "\n    ".join(expected))
                    print("  --- printed (normalised)\n    " + "\n    ".join(printed[:60]))
        if file_ran == 0:
            file_failures += 1
            print(f"{path}: no example found")
        print(f"{path}: {file_ran} commands run, {file_failures} problem(s)")
        ran += file_ran
        failures += file_failures
    print(f"total: {ran} commands run in {len(files)} file(s), {failures} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
