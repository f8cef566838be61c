#!/usr/bin/env python3
"""Writes seeded permutation connection matrices (.cm) for `mrc sim` scenarios.

    tools/cm/gen_permutation.py                 # every matrix the shipped scenarios name
    tools/cm/gen_permutation.py --check         # the same, and verify each against its SHA-256
    tools/cm/gen_permutation.py OUT NODES BYTES [--seed S]   # one matrix

The format is the one `src/sim/cm.cpp` reads (htsim's connection-matrix text format):

    Nodes <n>
    Connections <n>
    <src>-><dst> id <i> start 0 size <bytes>      (one line per host, i = 1..n)

How a permutation is drawn: Python's `random.Random(seed)` shuffles the source list 0..n-1 and then
the destination list 0..n-1; wherever a host would send to itself, its destination is swapped with
the next line's (wrapping to line 0). Line i pairs source[i] with destination[i]. This is the method
of the uet-htsim matrix generator with its default seed 13, so the two matrices of scenario 1 come
out byte-identical to the files uet-htsim ships (commit 40ccb05,
htsim/sim/datacenter/connection_matrices/) and `--check` proves it with their SHA-256: runs of
`mrc sim` on them use exactly the flow pairs of the htsim reference results (docs/htsim.md).

Python standard library only. The output depends on CPython's `random` (Mersenne Twister, the
`shuffle` of Python 3.2 and later), which is stable across Python 3 releases.
"""

import argparse
import hashlib
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The matrices that scenarios/*.toml name (`cm = "cm/..."`, relative to scenarios/), with the
# SHA-256 of uet-htsim's copy of each.
SCENARIO_MATRICES = [
    ("perm_128n_128c_2MB.cm", 128, 2000000, 13,
     "23aaab08c5612f23e6e978363ca677c85e045ff9191425c58f34313b1cb75fcc"),
    ("perm_1024n_1024c_0u_2000000b.cm", 1024, 2000000, 13,
     "59fed7ae6bcc12a863a81d16a36a514e975b7a1b6c9fd729542d69d550480c3e"),
]


def permutation(nodes, seed):
    """(src, dst) pairs: every host sends once and receives once, never to itself."""
    rng = random.Random(seed)
    srcs = list(range(nodes))
    dsts = list(range(nodes))
    rng.shuffle(srcs)
    rng.shuffle(dsts)
    for i in range(nodes):
        if srcs[i] == dsts[i]:
            j = (i + 1) % nodes
            dsts[i], dsts[j] = dsts[j], dsts[i]
    return list(zip(srcs, dsts))


def render(nodes, nbytes, seed):
    lines = ["Nodes %d" % nodes, "Connections %d" % nodes]
    for i, (s, d) in enumerate(permutation(nodes, seed)):
        lines.append("%d->%d id %d start 0 size %d" % (s, d, i + 1, nbytes))
    return ("\n".join(lines) + "\n").encode("ascii")


def write(path, data):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", help="output file (omit: write every scenario matrix)")
    ap.add_argument("nodes", nargs="?", type=int)
    ap.add_argument("bytes", nargs="?", type=int)
    ap.add_argument("--seed", type=int, default=13, help="random seed (default 13)")
    ap.add_argument("--dir", default=os.path.join(ROOT, "scenarios", "cm"),
                    help="where the scenario matrices go (default scenarios/cm)")
    ap.add_argument("--check", action="store_true",
                    help="verify the scenario matrices against their SHA-256 (exit 1 on a mismatch)")
    a = ap.parse_args(argv)

    if a.out is not None:
        if a.nodes is None or a.bytes is None:
            ap.error("OUT needs NODES and BYTES")
        if a.nodes < 2 or a.bytes <= 0:
            ap.error("need NODES >= 2 and BYTES > 0")
        write(a.out, render(a.nodes, a.bytes, a.seed))
        print(a.out)
        return 0

    bad = 0
    for name, nodes, nbytes, seed, sha in SCENARIO_MATRICES:
        data = render(nodes, nbytes, seed)
        path = os.path.join(a.dir, name)
        write(path, data)
        got = hashlib.sha256(data).hexdigest()
        ok = got == sha
        if a.check and not ok:
            bad += 1
        print("%s  %s%s" % (path, got, "" if ok else "  (differs from uet-htsim's copy)"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
