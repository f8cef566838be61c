#!/usr/bin/env bash
# (d) fault link-down of one spine link in the middle of a stream: after the event traffic moves to
# the other spine and nothing sent after the event is lost; link-up brings spine 1 back.
PREFIX=mrctd
source "$(dirname "$0")/lib.sh"
N=6000 RATE=2000
"$TB" up --hosts 2 --planes 2 --spines 2 --mode ecmp
start_recv r h2 $N
snap c0
"$TB" exec h1 -- "$PY" "$GEN" send --dst 10.1.2.1 --count $N --sport 40000-40255 --rate $RATE \
  --log "$WORK/send.log" >"$WORK/send.out" &
SEND_PID=$!
sleep 0.6
snap c1
# spine 1 loses its link to leaf 1: leaf 1 sees carrier loss (linkdown) on s1
"$TB" fault link-down p1s1 l1
T_EVENT=$("$PY" -c 'import time; print(time.monotonic())')
snap c2
T_C2=$("$PY" -c 'import time; print(time.monotonic())')
wait $SEND_PID || fail "sender failed"
snap c3
wait_recv r
read -r B1 B2 < <("$PY" "$CHK" spines "$WORK/c0.json" "$WORK/c1.json" --plane 1 --spines 2 | tr -d '[],')
read -r A1 A2 < <("$PY" "$CHK" spines "$WORK/c2.json" "$WORK/c3.json" --plane 1 --spines 2 | tr -d '[],')
echo "before the event: spine1=$B1 spine2=$B2; after the event: spine1=$A1 spine2=$A2"
(( B1 > 0 && B2 > 0 )) || fail "both spines should carry traffic before the event"
(( A1 <= 2 )) || fail "spine 1 still carried $A1 packets toward leaf 2 after its link went down"
"$PY" - "$WORK/send.log" "$WORK/r.out" "$T_EVENT" "$A2" "$T_C2" <<'PYEOF' || fail "blackholing after the event"
import json, sys
log = [l.split() for l in open(sys.argv[1])]
got = set(json.load(open(sys.argv[2]))["seqs"])
t_ev = float(sys.argv[3]); a2 = int(sys.argv[4]); t_c2 = float(sys.argv[5])
after = [int(s) for s, t in log if float(t) > t_ev]
after_c2 = [int(s) for s, t in log if float(t) > t_c2]
lost_after = [s for s in after if s not in got]
lost_all = len(log) - len(got)
print(f"sent {len(log)}, received {len(got)}, lost in total {lost_all}; sent after the event {len(after)}, "
      f"lost after the event {len(lost_after)}; sent after the second snapshot {len(after_c2)}, spine 2 carried {a2} of them")
ok = len(after_c2) >= 500 and not lost_after and a2 >= len(after_c2)
sys.exit(0 if ok else 1)
PYEOF
# link-up restores the routes: both spines carry traffic again
"$TB" fault link-up p1s1 l1
start_recv r2 h2 1000
snap c4
"$TB" exec h1 -- "$PY" "$GEN" send --dst 10.1.2.1 --count 1000 --sport 40000-40255 --rate 5000 >/dev/null
snap c5
wait_recv r2
read -r U1 U2 < <("$PY" "$CHK" spines "$WORK/c4.json" "$WORK/c5.json" --plane 1 --spines 2 | tr -d '[],')
echo "after link-up: spine1=$U1 spine2=$U2, received $("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["unique"])' "$WORK/r2.out")"
(( U1 > 0 && U2 > 0 )) || fail "after link-up both spines should carry traffic again"
grep -q '"unique": 1000' "$WORK/r2.out" || fail "losses after link-up"
echo PASS
