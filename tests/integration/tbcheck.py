#!/usr/bin/env python3
"""Assertions over `mrc-testbed counters --json` snapshots for the integration tests."""
import argparse
import json
import sys


def load(p):
    return json.load(open(p))["nodes"]


def tx(nodes_a, nodes_b, node, iface, field="tx_packets"):
    return nodes_b[node]["ifaces"][iface][field] - nodes_a[node]["ifaces"][iface][field]


def spine_deltas(a, b, plane, spines, dst_leaf):
    return [tx(a, b, f"p{plane}s{s}", f"l{dst_leaf}") for s in range(1, spines + 1)]


def cmd_spread(o):
    a, b = load(o.before), load(o.after)
    ok = True
    for p in [int(x) for x in o.planes.split(",")]:
        d = spine_deltas(a, b, p, o.spines, o.dst_leaf)
        share = o.sent / o.spines
        verdict = []
        if sum(d) < o.sent:
            verdict.append(f"only {sum(d)} < {o.sent} sent crossed the spines")
        if min(d) <= 0:
            verdict.append("a spine carried nothing")
        if max(d) > o.max_ratio * share:
            verdict.append(f"a spine carried {max(d)} > {o.max_ratio} x share {share:.0f}")
        print(f"plane {p}: spine tx toward leaf {o.dst_leaf}: {d} (share {share:.0f}) {'OK' if not verdict else 'FAIL: ' + '; '.join(verdict)}")
        ok = ok and not verdict
    sys.exit(0 if ok else 1)


def cmd_spines(o):
    """print per-spine deltas for one plane as JSON list"""
    a, b = load(o.before), load(o.after)
    print(json.dumps(spine_deltas(a, b, o.plane, o.spines, o.dst_leaf)))


def cmd_nft(o):
    n = load(o.snapshot)[o.node]["nft"]
    print(json.dumps(n.get(o.counter, {"packets": 0})["packets"]))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("spread")
    s.add_argument("before"); s.add_argument("after")
    s.add_argument("--planes", required=True); s.add_argument("--spines", type=int, required=True)
    s.add_argument("--dst-leaf", type=int, default=2); s.add_argument("--sent", type=int, required=True)
    s.add_argument("--max-ratio", type=float, default=1.5)
    s = sub.add_parser("spines")
    s.add_argument("before"); s.add_argument("after")
    s.add_argument("--plane", type=int, required=True); s.add_argument("--spines", type=int, required=True)
    s.add_argument("--dst-leaf", type=int, default=2)
    s = sub.add_parser("nft")
    s.add_argument("snapshot"); s.add_argument("node"); s.add_argument("counter")
    o = ap.parse_args()
    {"spread": cmd_spread, "spines": cmd_spines, "nft": cmd_nft}[o.cmd](o)


if __name__ == "__main__":
    main()
