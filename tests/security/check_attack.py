#!/usr/bin/env python3
"""Judges an attacked `mrc perf` run (tests/security/*.sh): the client's JSON report and the
server's JSON output, both with --metrics. The transfer must have verified every byte, and the
counters must show that the forged packets arrived and were refused or dismissed, not obeyed.
   check_attack.py CLIENT_JSON SERVER_JSON [--auth]"""
import json, sys
cli = json.load(open(sys.argv[1]))
srv_text = open(sys.argv[2]).read().strip()
auth = sys.argv[3] == "--auth"
ok = True
def check(cond, what):
    global ok
    print(("ok:   " if cond else "FAIL: ") + what)
    ok &= cond
check(cli.get("verified") is True and cli.get("mismatched_bytes") == 0,
      f"client verified {cli.get('verified_bytes')} bytes, {cli.get('mismatched_bytes')} mismatched")
def sums(report):
    m = report.get("metrics", {})
    total = {}
    for q in m.get("qps", []):
        for k, v in q.get("counters", {}).items():
            if isinstance(v, (int, float)): total[k] = total.get(k, 0) + v
    for k, v in m.get("endpoint", {}).items():
        if isinstance(v, (int, float)): total["ep." + k] = v
    return total
c = sums(cli)
docs, at, dec = [], 0, json.JSONDecoder()
while at < len(srv_text):  # the server prints one JSON document per session (and maybe a summary)
    while at < len(srv_text) and srv_text[at].isspace(): at += 1
    if at >= len(srv_text): break
    d, at = dec.raw_decode(srv_text, at)
    docs.append(d)
sessions = [d for d in docs if d.get("role") == "server" and "metrics" in d]
check(len(sessions) == 1, f"the server reported {len(sessions)} session(s) with metrics")
s = sums(sessions[0]) if sessions else {}
print("client:", {k: v for k, v in c.items() if "refused" in k or "fatal" in k or "auth" in k or "corrected" in k})
print("server:", {k: v for k, v in s.items() if "refused" in k or "fatal" in k or "auth" in k or "corrected" in k})
if auth:
    check(c.get("ep.rx_auth_failed", 0) > 0, "the client refused forged packets by their MAC")
    check(c.get("rx_fatal_nak_held", 0) == 0, "no forged NAK reached the client's QP")
    check(c.get("ep.rx_ep_refused", 0) > 0, "the client refused the forged port-status updates")
else:
    check(s.get("rx_refused", 0) > 0, "the server refused forged writes")
    check(c.get("rx_fatal_nak_held", 0) + c.get("rx_fatal_nak_dismissed", 0) > 0,
          "forged fatal NAKs reached the client and were held or dismissed, not obeyed")
    check(c.get("ep.rx_ep_refused", 0) > 0, "the client refused port-status updates without their arrival plane")
sys.exit(0 if ok else 1)
