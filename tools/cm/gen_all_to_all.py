#!/usr/bin/env python3
"""Writes all-to-all connection matrices (.cm): every ordered host pair sends one message.

    tools/cm/gen_all_to_all.py OUT NODES BYTES [--network HOSTS]
    tools/cm/gen_all_to_all.py scenarios/cm/a2a_128n_64KB.cm 128 65536
    tools/cm/gen_all_to_all.py scenarios/cm/a2a_64n_1MB.cm 64 1000000 --network 128

The shape of one MoE all-to-all step: NODES x (NODES - 1) connections, all starting at t = 0. Lines
are ordered by source, then destination (0->1, 0->2, ..., 0->n-1, 1->0, ...), ids 1.. in that
order; the same matrix `mrc sim` builds for `kind = "all_to_all"` (src/sim/cm.cpp), in htsim's
connection-matrix text format, so `mrc sim` (kind = "cm") and htsim_uec (-tm) read identical input
(bench/sim_speed.sh). No randomness: the file depends on its arguments only.

--network sets the `Nodes` line (default NODES): htsim builds its default fat tree from that count
and accepts only k^3/4 hosts (128, 432, 1024, ...), so a 64- or 256-host all-to-all runs on hosts
0..NODES-1 of a 128- or 1024-host network.
"""

import argparse
import os
import sys


def render(nodes, nbytes, network):
    lines = ["Nodes %d" % network, "Connections %d" % (nodes * (nodes - 1))]
    i = 1
    for s in range(nodes):
        for d in range(nodes):
            if s != d:
                lines.append("%d->%d id %d start 0 size %d" % (s, d, i, nbytes))
                i += 1
    return ("\n".join(lines) + "\n").encode("ascii")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="output file")
    ap.add_argument("nodes", type=int)
    ap.add_argument("bytes", type=int)
    ap.add_argument("--network", type=int, help="hosts of the network (the Nodes line; default NODES)")
    a = ap.parse_args(argv)
    network = a.nodes if a.network is None else a.network
    if a.nodes < 2 or a.bytes <= 0 or network < a.nodes:
        ap.error("need NODES >= 2, BYTES > 0 and HOSTS >= NODES")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "wb") as f:
        f.write(render(a.nodes, a.bytes, network))
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
