#!/usr/bin/env bash
# `mrc perf` moves 1 GiB (1 MiB WRITEs) from h1 to h2 across the 4-plane x 2-spine fabric while plane
# 3's leaf 2 drops 1 % of the packets it forwards to h2 at random (nftables). The transfer must
# complete with every byte verified; the drop counter must show the loss really happened and the
# client's retransmissions must account for it. Not one for one: the rule also drops EV probes and
# retransmitted copies of packets that had only been delayed, neither of which is sent again, so at
# least 90 % of the drops must have been retransmitted.
PREFIX=mrcpd
MRC=${1:-${MRC_BIN:-}}
source "$(dirname "$0")/tb_perf_lib.sh"
perf_fabric_up
"$TB" fault drop p3l2 h2 1
perf_start_server
snap before
perf_start_client -s 1MiB -n 1024
perf_wait
snap after
perf_check --min-bytes $((1 << 30))
"$PY" - "$WORK/after.json" "$WORK/cli.json" <<'PY' || fail "drop / retransmission counts"
import json, sys
n = json.load(open(sys.argv[1]))["nodes"]["p3l2"]["nft"]
r = json.load(open(sys.argv[2]))["results"][0]
seen, dropped, rtx = n["seen_h2"]["packets"], n["drop_h2"]["packets"], r["retransmissions"]
print(f"plane 3 leaf 2 -> h2: {seen} packets seen, {dropped} dropped ({dropped / max(seen, 1):.2%}); "
      f"client retransmissions {rtx}")
sys.exit(0 if dropped >= 0.005 * seen and dropped > 100 and rtx >= 0.9 * dropped else 1)
PY
echo PASS
