#!/usr/bin/env bash
# (b) flowlabel mode (IPv6 hash policy 3, fields 0x8 = flow label only): with a fixed UDP source
# port and varying explicit flow labels every plane and spine carries traffic, no spine more than
# 1.5x its share; control: a fixed label with varying source ports stays on one spine.
PREFIX=mrctb
source "$(dirname "$0")/lib.sh"
N=1000
"$TB" up --hosts 2 --planes 4 --spines 2 --mode flowlabel
start_recv r h2 $((4 * N))
snap before
for p in 1 2 3 4; do
  "$TB" exec h1 -- "$PY" "$GEN" send --dst "fd00:$p:2::1" --count $N --sport 49152 --flowlabel 1-256 --rate 5000 >/dev/null
done
snap after
wait_recv r
"$PY" "$CHK" spread "$WORK/before.json" "$WORK/after.json" --planes 1,2,3,4 --spines 2 --sent $N --max-ratio 1.5 ||
  fail "flow-label spraying over spines"
grep -q "\"received\": $((4 * N))" "$WORK/r.out" || fail "not every datagram arrived"
# control: the label, not the port, selects the spine
start_recv c h2 $N
snap c0
"$TB" exec h1 -- "$PY" "$GEN" send --dst fd00:1:2::1 --count $N --sport 40000-40255 --flowlabel 0x12345 --rate 5000 >/dev/null
snap c1
wait_recv c
D=$("$PY" "$CHK" spines "$WORK/c0.json" "$WORK/c1.json" --plane 1 --spines 2)
echo "fixed label 0x12345, 256 source ports, plane 1: spines $D"
"$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(0 if max(d) >= int(sys.argv[2]) and min(d) <= 2 else 1)' "$D" $N ||
  fail "a fixed flow label should keep every packet on one spine"
echo PASS
