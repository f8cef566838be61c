#!/usr/bin/env python3
"""Docs check: the repository stands alone and its cross-references resolve.

    tools/check_docs.py [--root DIR]

Scans every text file of the tree (`git ls-files` when DIR is a git work tree, else every file
under DIR; files with a NUL byte in their first 8 KiB are binary and skipped) and prints one
`file:line: message` per problem; exits 1 if there is any, 0 otherwise. Python standard library
only. The rules:

(a) Machine paths. An absolute path into one machine's user or work areas is an error in any file:
    a path starting with /work/, /home/, /root/, /Users/, /mnt/, /media/ or /scratch/, at the start
    of a word (after a space, quote, bracket, `=`, `:`, `,` or at the line start; "file://" URLs
    included), so URLs such as https://host/home/ do not match. /tmp/ paths are errors in Markdown
    prose only (no document lives there); inside Markdown code spans and fenced blocks, and in code
    and scripts, they are scratch files made at run time and allowed. System paths (/usr, /etc,
    /proc, /sys, /dev, /opt, /var, /run, /bin, /lib) name the OS's interfaces and are allowed.
(b) Outside documents. Citing the working notes that are not part of the repository is an error:
    "mrc-reference", "sim-reference", "machine-notes" / "machine notes", "shared/docs",
    "../shared". Cite docs/protocol.md, docs/htsim.md or docs/platform.md instead.
(c) Decision and question ids. Every id cited anywhere must be defined: D<n>[letter] by a table
    row `| D<n> |` of docs/decisions.md, W<n> by a row `| W<n> |` of docs/wire-format.md, CC-D<n>
    by a `**CC-D<n> ...**` item of docs/cc.md, Q-<AREA>-<n> by a row `| Q-<AREA>-<n> |` of
    docs/protocol.md. An id is a whole word (not part of 0xD2, -Wall, CC-D7 for D7, ...). A
    D-prefixed name such as D-CC-LOSS is an error: decisions are numbered.
(d) Markdown links. A relative link [text](path) or ![alt](path) in a .md file (outside code) must
    name an existing file or directory, relative to the linking file (a #fragment is ignored;
    http:, https:, mailto: and pure #anchor links are not checked).
(e) Section references. "NAME.md §N" or "NAME.md §N.M" (also "NAME.md) §N" after a link, and
    further "§N" in the same list) must name a numbered heading ("## N. ..." / "### N.M ...") of
    that document, found next to the citing file, in docs/ or at DIR; documents without numbered
    headings are not checked.

Two files are exempt from every rule because they must spell the defects out: this script and its
test, tests/docs/check_docs_test.py (its fixture trees are checked instead).
"""

import argparse
import os
import re
import subprocess
import sys

EXEMPT = {"tools/check_docs.py", "tests/docs/check_docs_test.py"}

B = r"(?:(?<=^)|(?<=[\s\"'`(\[<=:,;]))"
MACHINE = re.compile(B + r"/(?:work|home|root|Users|mnt|media|scratch)/")
TMP = re.compile(B + r"/tmp/")
OUTSIDE = re.compile(r"mrc-reference|sim-reference|machine[- ]notes|shared/docs|\.\./shared", re.I)

ID_D = re.compile(r"(?<![\w-])D(\d+[a-z]?)\b")
ID_DNAME = re.compile(r"(?<![\w-])D-[A-Z][A-Z0-9-]*\b")
ID_W = re.compile(r"(?<![\w-])W(\d+)\b")
ID_CC = re.compile(r"(?<![\w-])CC-D(\d+)\b")
ID_Q = re.compile(r"(?<![\w-])Q-([A-Z]+-\d+)\b")

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SECREF = re.compile(r"\b([\w.-]+\.md)\)?((?:(?:,\s*|\s+|\s*and\s+|\s*[-–]\s*)§[0-9][0-9a-z.]*)+)")
SECNUM = re.compile(r"§([0-9]+[a-z]?(?:\.[0-9]+)*)")
HEADING = re.compile(r"^#{2,6}\s+([0-9]+[a-z]?(?:\.[0-9]+)*)\.?\s")


def tracked_files(root):
    if os.path.isdir(os.path.join(root, ".git")) or os.path.isfile(os.path.join(root, ".git")):
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, check=True).stdout
        return sorted(p for p in out.decode().split("\0") if p)
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if x != ".git" and not x.startswith("build")]
        for n in names:
            files.append(os.path.relpath(os.path.join(d, n), root).replace(os.sep, "/"))
    return sorted(files)


def read_text(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace").splitlines()


def md_code_mask(lines):
    """Per line, the text with code (fenced blocks, `spans`) blanked out, for Markdown prose rules."""
    out = []
    fence = None
    for ln in lines:
        s = ln.lstrip()
        if fence is None and (s.startswith("```") or s.startswith("~~~")):
            fence = s[:3]
            out.append("")
            continue
        if fence is not None:
            if s.startswith(fence):
                fence = None
            out.append("")
            continue
        if ln.startswith("    ") and not ln.strip().startswith(("-", "*", "|")):
            out.append("")  # indented code block
            continue
        out.append(re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), ln))
    return out


def defined_ids(root):
    def grab(rel, rx):
        lines = read_text(os.path.join(root, rel)) or []
        return {m.group(1) for ln in lines for m in [rx.match(ln)] if m}

    return {
        "D": grab("docs/decisions.md", re.compile(r"^\|\s*D(\d+[a-z]?)\s*\|")),
        "W": grab("docs/wire-format.md", re.compile(r"^\|\s*W(\d+)\s*\|")),
        "CC": grab("docs/cc.md", re.compile(r"^\s*[-*]\s*\*\*CC-D(\d+)\b")),
        "Q": grab("docs/protocol.md", re.compile(r"^\|\s*Q-([A-Z]+-\d+)\s*\|")),
    }


_headings = {}


def headings_of(path):
    if path not in _headings:
        lines = read_text(path) or []
        nums = set()
        fence = False
        for ln in lines:
            if ln.lstrip().startswith("```"):
                fence = not fence
            elif not fence:
                m = HEADING.match(ln)
                if m:
                    nums.add(m.group(1))
        _headings[path] = nums
    return _headings[path]


def find_doc(root, rel_dir, name):
    for cand in (os.path.join(root, rel_dir, name), os.path.join(root, "docs", os.path.basename(name)),
                 os.path.join(root, name)):
        if os.path.isfile(cand):
            return cand
    return None


def check(root):
    root = os.path.abspath(root)
    problems = []
    ids = defined_ids(root)
    id_docs = {"D": "docs/decisions.md", "W": "docs/wire-format.md", "CC": "docs/cc.md",
               "Q": "docs/protocol.md"}

    def report(rel, i, msg):
        problems.append(f"{rel}:{i}: {msg}")

    for rel in tracked_files(root):
        lines = read_text(os.path.join(root, rel))
        if lines is None or rel in EXEMPT:
            continue
        is_md = rel.endswith(".md")
        prose = md_code_mask(lines) if is_md else None
        rel_dir = os.path.dirname(rel)
        for i, ln in enumerate(lines, 1):
            probe = ln.replace("file://", " ")
            for m in MACHINE.finditer(probe):
                report(rel, i, f"(a) machine path '{probe[m.start():].split()[0]}'")
            if is_md:
                for m in TMP.finditer(prose[i - 1]):
                    report(rel, i, "(a) /tmp/ path in Markdown prose (put commands in code)")
            for m in OUTSIDE.finditer(ln):
                report(rel, i, f"(b) cites a document outside the repository: '{m.group(0)}'")
            for rx, kind in ((ID_D, "D"), (ID_W, "W"), (ID_CC, "CC"), (ID_Q, "Q")):
                for m in rx.finditer(ln):
                    if ids[kind] and m.group(1) not in ids[kind]:
                        prefix = {"D": "D", "W": "W", "CC": "CC-D", "Q": "Q-"}[kind]
                        report(rel, i, f"(c) {prefix}{m.group(1)} is not defined in {id_docs[kind]}")
            for m in ID_DNAME.finditer(ln):
                report(rel, i, f"(c) '{m.group(0)}' is not a decision id (decisions are D<n>)")
            if is_md:
                for m in LINK.finditer(prose[i - 1]):
                    target = m.group(1)
                    if re.match(r"^(?:[a-z][a-z0-9+.-]*:|#)", target, re.I):
                        continue
                    path = target.split("#", 1)[0]
                    if not path:
                        continue
                    full = os.path.normpath(os.path.join(root, rel_dir, path))
                    if not os.path.exists(full):
                        report(rel, i, f"(d) link to a missing file: {target}")
            for m in SECREF.finditer(ln):
                doc = find_doc(root, rel_dir, m.group(1))
                if doc is None:
                    continue
                have = headings_of(doc)
                if not have:
                    continue
                for n in SECNUM.findall(m.group(2)):
                    n = n.rstrip(".")
                    if n not in have:
                        report(rel, i, f"(e) {m.group(1)} has no section {n}")
    return problems


def main(argv):
    ap = argparse.ArgumentParser(description="Checks the docs rules (a)-(e); see the top of this file.")
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    a = ap.parse_args(argv)
    problems = check(a.root)
    for p in problems:
        print(p)
    if problems:
        print(f"check_docs: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("check_docs: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
