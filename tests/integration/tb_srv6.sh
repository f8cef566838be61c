#!/usr/bin/env bash
# (c) srv6 mode: datagrams addressed to the uSID carrier for spine 1 (then spine 2) cross exactly
# that spine, arrive at the host-owned final address with correct UDP checksums
# (Udp6InCsumErrors on the receiver stays 0). Control: a plain UDP socket sending to the carrier
# checksums over the carrier address, and the receiver does count those as checksum errors.
PREFIX=mrctc
source "$(dirname "$0")/lib.sh"
need_srv6
N=300
"$TB" up --hosts 2 --planes 2 --spines 2 --mode srv6
csum_err() { "$TB" exec h2 -- awk '$1 == "Udp6InCsumErrors" {print $2}' /proc/net/snmp6; }
E0=$(csum_err)
start_recv r h2 $((4 * N))
for p in 1 2; do
  FINAL=$("$TB" show --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["host_list"][1]["planes"][int(sys.argv[1])-1]["srv6"])' $p)
  for s in 1 2; do
    SID=$("$TB" sid --plane $p --src 1 --dst 2 --spine $s)
    snap "p${p}s${s}a"
    "$TB" exec h1 -- "$PY" "$GEN" send --dst "$SID" --srv6-final "$FINAL" --src "fd00:$p:1::1" \
      --count $N --sport 40000-40063 --rate 5000 >/dev/null
    snap "p${p}s${s}b"
    D=$("$PY" "$CHK" spines "$WORK/p${p}s${s}a.json" "$WORK/p${p}s${s}b.json" --plane $p --spines 2)
    echo "plane $p, carrier $SID (spine $s), final $FINAL: spine tx toward leaf 2 = $D"
    "$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); s=int(sys.argv[2]); n=int(sys.argv[3])
sys.exit(0 if d[s-1] >= n and all(v <= 2 for i, v in enumerate(d) if i != s-1) else 1)' "$D" $s $N ||
      fail "plane $p: packets for spine $s did not follow the encoded spine"
  done
done
wait_recv r
E1=$(csum_err)
"$PY" - "$WORK/r.out" $N <<'PYEOF' || fail "delivery to the final uSID addresses"
import json, sys
r = json.load(open(sys.argv[1])); n = int(sys.argv[2])
print("received by destination address:", r["by_dst"])
sys.exit(0 if r["by_dst"].get("fcbb:bb01:3002::") == 2 * n and r["by_dst"].get("fcbb:bb02:3002::") == 2 * n else 1)
PYEOF
echo "Udp6InCsumErrors on h2: before $E0, after $E1"
(( E1 == E0 )) || fail "$((E1 - E0)) UDP checksum errors at the receiver"
# control: the checksum check can fail
SID=$("$TB" sid --plane 1 --src 1 --dst 2 --spine 1)
start_recv c h2 50 3 3
"$TB" exec h1 -- "$PY" "$GEN" send --dst "$SID" --count 50 --sport 40000 --rate 5000 >/dev/null
wait_recv c
E2=$(csum_err)
echo "control, plain UDP socket to the carrier: Udp6InCsumErrors +$((E2 - E1)), delivered $(grep -o '"received": [0-9]*' "$WORK/c.out")"
(( E2 - E1 >= 45 )) || fail "a checksum over the carrier address should be counted as an error"
echo PASS
