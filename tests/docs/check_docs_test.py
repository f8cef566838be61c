#!/usr/bin/env python3
"""Tests tools/check_docs.py on fixture trees built in a temporary directory.

    tests/docs/check_docs_test.py [PATH/TO/check_docs.py]

A clean tree must pass (exit 0); each other case plants one defect into a copy of the clean tree
and must fail (exit 1) with a message naming the defect's file:line and rule. Standard library only.
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "tools", "check_docs.py")

CLEAN = {
    "docs/decisions.md": "# Decisions\n\n| Id | Q | Decision |\n|---|---|---|\n| D1 | Q-EV-1 | one |\n"
                         "| D1b | — | two |\n",
    "docs/wire-format.md": "# Wire\n\n## 1. Opcodes\n\n| # | Decision |\n|---|---|\n| W1 | BTH |\n",
    "docs/cc.md": "# CC\n\n- **CC-D1 (units).** Bytes.\n",
    "docs/protocol.md": "# Protocol\n\n## 1. What\n\n### 1.1 More\n\n| Id | Question |\n|---|---|\n"
                        "| Q-EV-1 | byte order |\n",
    "README.md": "# Fixture\n\nSee [protocol](docs/protocol.md) §1.1 and [cc](docs/cc.md#units), "
                 "[web](https://example.org/home/x).\n\n```sh\ntool --out /tmp/out.json\n```\n\n"
                 "Use `/tmp/scratch` freely.\n",
    "src/a.cpp": "// D1, D1b, W1, CC-D1 and Q-EV-1 (docs/protocol.md §1); 0xD2 and -Wall are not ids.\n"
                 "#include </usr/include/stdio.h>\nconst char* t = \"/tmp/x\"; const char* p = \"/proc/sys\";\n",
}

# (name, file, appended line, expected fragments of the report line)
M = "/wo" + "rk/"
CASES = [
    ("machine path in code", "src/a.cpp", 'const char* m = "' + M + 'main/x";', ["(a)"]),
    ("home path in a doc", "docs/cc.md", "Built in /ho" + "me/alice/mrc.", ["(a)"]),
    ("/tmp in Markdown prose", "README.md", "The notes are in /t" + "mp/notes.md.", ["(a)", "/tmp/"]),
    ("outside document", "src/a.cpp", "// as in mrc-" + "reference §2.6", ["(b)"]),
    ("outside document path", "docs/cc.md", "See ../sha" + "red/docs/x.md.", ["(b)"]),
    ("machine notes", "README.md", "(machine " + "notes §3)", ["(b)"]),
    ("undefined D", "src/a.cpp", "// see D99", ["(c)", "D99"]),
    ("undefined D letter", "docs/cc.md", "As D1c says.", ["(c)", "D1c"]),
    ("undefined W", "README.md", "Per W42.", ["(c)", "W42"]),
    ("undefined CC-D", "src/a.cpp", "// CC-D7", ["(c)", "CC-D7"]),
    ("undefined Q", "docs/decisions.md", "| D2 | Q-EV-9 | x |", ["(c)", "Q-EV-9"]),
    ("named decision", "src/a.cpp", "// docs/decisions.md D-CC-LOSS", ["(c)", "D-CC-LOSS"]),
    ("broken link", "README.md", "[gone](docs/missing.md)", ["(d)", "docs/missing.md"]),
    ("broken image", "docs/cc.md", "![plot](results/none.png)", ["(d)"]),
    ("missing section", "src/a.cpp", "// docs/protocol.md §7.2", ["(e)", "7.2"]),
    ("missing later section", "README.md", "[p](docs/protocol.md) §1, §3", ["(e)", "section 3"]),
]


def build(root, extra=None):
    for rel, text in CLEAN.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
            if extra and extra[0] == rel:
                f.write(extra[1] + "\n")
    with open(os.path.join(root, "logo.png"), "wb") as f:
        f.write(b"\x89PNG\0\0" + M.encode())  # binary: skipped


def run(root):
    p = subprocess.run([sys.executable, CHECKER, "--root", root], capture_output=True, text=True)
    return p.returncode, p.stdout


def main():
    failures = 0
    with tempfile.TemporaryDirectory(prefix="check_docs_test.") as tmp:
        clean = os.path.join(tmp, "clean")
        build(clean)
        rc, out = run(clean)
        if rc != 0:
            print("FAIL clean tree: exit %d\n%s" % (rc, out))
            failures += 1
        else:
            print("ok   clean tree passes")
        for i, (name, rel, line, want) in enumerate(CASES):
            root = os.path.join(tmp, "case%d" % i)
            build(root, (rel, line))
            lineno = CLEAN[rel].count("\n") + 1
            rc, out = run(root)
            hits = [ln for ln in out.splitlines() if ln.startswith("%s:%d:" % (rel, lineno))]
            good = rc == 1 and any(all(w in h for w in want) for h in hits)
            extra = [ln for ln in out.splitlines() if ln not in hits]
            if not good or extra:
                print("FAIL %s: exit %d, expected %s at %s:%d\n%s" % (name, rc, want, rel, lineno, out))
                failures += 1
            else:
                print("ok   %s" % name)
    print("%d case(s) failed" % failures if failures else "all cases passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
