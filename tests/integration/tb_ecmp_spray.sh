#!/usr/bin/env bash
# (a) ecmp mode, 2 hosts x 4 planes x 2 spines: UDP/4791 with varying source ports from h1 to h2 on
# every plane; every plane and every spine must carry traffic, no spine more than 1.5x its share.
PREFIX=mrcta
source "$(dirname "$0")/lib.sh"
N=1000
"$TB" up --hosts 2 --planes 4 --spines 2 --mode ecmp
start_recv r h2 $((4 * N))
snap before
for p in 1 2 3 4; do
  "$TB" exec h1 -- "$PY" "$GEN" send --dst "10.$p.2.1" --count $N --sport 40000-40255 --rate 5000 >/dev/null
done
snap after
wait_recv r
"$PY" "$CHK" spread "$WORK/before.json" "$WORK/after.json" --planes 1,2,3,4 --spines 2 --sent $N --max-ratio 1.5 ||
  fail "ECMP spraying over spines"
"$PY" - "$WORK/r.out" "$N" <<'PY' || fail "delivery"
import json, sys
r = json.load(open(sys.argv[1])); n = int(sys.argv[2])
per = {f"10.{p}.2.1": r["by_dst"].get(f"10.{p}.2.1", 0) for p in range(1, 5)}
print("received per plane address:", per, "unique", r["unique"])
sys.exit(0 if all(v == n for v in per.values()) and r["unique"] == n else 1)
PY
echo PASS
