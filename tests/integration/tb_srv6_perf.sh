#!/usr/bin/env bash
# (h) `mrc perf --ev-mode srv6` over the srv6 fabric (2 hosts x 2 planes x 2 spines): every packet's
# destination is the uSID carrier of its EV's path, built by the endpoint, and the routers' End
# (next-csid) shifts lead it to the peer's final address; the UDP checksum is made over that final
# address (raw socket), so the receiving kernel accepts it.
#   client h1: --srv6-paths 2001,2001,2002 -> EV v takes spine 1 when v mod 3 < 2, else spine 2
#   server h2: --srv6-paths 2002           -> every SACK back through spine 2
# Checks: the run exits 0 with every byte verified; per plane, each spine's packets toward leaf 2
# equal (within stray control traffic) the client's per-EV packet counts summed over the EVs that
# map to that spine, and the uneven 7:3 split shows up; spine 1 carries (almost) nothing toward
# leaf 1; no UDP checksum errors on either host.
# Usage: tb_srv6_perf.sh PATH/TO/mrc   (CMake passes $<TARGET_FILE:mrc>)
PREFIX=mrcs6
MRC=${1:-${MRC_BIN:-}}
source "$(dirname "$0")/lib.sh"
need_srv6
[[ -n $MRC && -x $MRC ]] || fail "usage: $0 PATH/TO/mrc (got '${MRC}')"
PORT=18515
SRV_PID= CLI_PID=
trap 'rc=$?; for p in $CLI_PID $SRV_PID; do kill "$p" 2>/dev/null || true; done; set +e; (exit $rc); cleanup' EXIT

# MTU 9000: a 4096-byte payload plus headers must not be fragmented (fragments carry no UDP header).
"$TB" up --hosts 2 --planes 2 --spines 2 --mode srv6 --mtu 9000
"$TB" show --json >"$WORK/show.json"
read -r L1 L2 OOB < <("$PY" - "$WORK/show.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
h = {x["node"]: sorted(x["planes"], key=lambda p: p["plane"]) for x in s["host_list"]}
print(",".join(p["srv6"] for p in h["h1"]), ",".join(p["srv6"] for p in h["h2"]), h["h2"][0]["ipv4"])
PY
)
echo "client final addresses $L1 -> server $L2 (OOB over $OOB:$PORT)"
csum_err() { "$TB" exec "$1" -- awk '$1 == "Udp6InCsumErrors" {print $2}' /proc/net/snmp6; }
E1=$(csum_err h1) E2=$(csum_err h2)

"$TB" exec h2 -- timeout 80 "$MRC" perf --server --once --bind "$OOB" -p $PORT --local "$L2" \
  --ev-mode srv6 --srv6-paths 2002 >"$WORK/srv.out" 2>&1 &
SRV_PID=$!
wait_for "$WORK/srv.out" 'waiting on' "$SRV_PID"

snap before
rc=0
"$TB" exec h1 -- timeout 70 "$MRC" perf --client "$OOB" -p $PORT --local "$L1" --ev-mode srv6 \
  --srv6-paths 2001,2001,2002 -s 1MiB -n 64 --evs 8 --backup-evs 2 -m 4096 --lat-iters 50 --json --metrics \
  >"$WORK/cli.json" 2>"$WORK/cli.err" || rc=$?
snap after
src=0; wait "$SRV_PID" || src=$?; SRV_PID=
echo "client exit $rc, server exit $src; server: $(tail -n1 "$WORK/srv.out")"
[[ $rc -eq 0 ]] || { cat "$WORK/cli.err" >&2; fail "mrc perf client exited $rc"; }
[[ $src -eq 0 ]] || { cat "$WORK/srv.out" >&2; fail "mrc perf server exited $src"; }
C1=$(csum_err h1) C2=$(csum_err h2)
echo "Udp6InCsumErrors: h1 $E1 -> $C1, h2 $E2 -> $C2"
((C1 == E1 && C2 == E2)) || fail "UDP checksum errors at a receiver: the checksum must cover the final address"

"$PY" - "$WORK/cli.json" "$WORK/before.json" "$WORK/after.json" <<'PY' || fail "SRv6 paths / perf result"
import json, sys
r = json.load(open(sys.argv[1]))
a = json.load(open(sys.argv[2]))["nodes"]; b = json.load(open(sys.argv[3]))["nodes"]
def d(node, ifn): return b[node]["ifaces"][ifn]["tx_packets"] - a[node]["ifaces"][ifn]["tx_packets"]
res = r["results"][0]
print(f"verified={r['verified']} {res['bytes'] * res['iterations'] / 2**20:.0f} MiB, {res['bw_gbps']:.3f} Gb/s, "
      f"packets {res['packets']}, retransmissions {res['retransmissions']}")
bad = [] if r.get("verified") is True and res["iterations"] == 64 else ["run not verified / incomplete"]
for pm in r["metrics"]["planes"]:
    print(f"plane {pm['plane'] + 1} ({pm['address']}): sent {pm['tx_packets']}, kernel refused {pm['tx_dropped']}, "
          f"received {pm['rx_packets']}, from unknown sources {pm['rx_unknown_source']}")
ep = r["metrics"]["endpoint"]
if ep["rx_bad_packet"] or ep["rx_wrong_peer"]: bad.append(f"endpoint refused packets: {ep}")
for plane in (1, 2):
    want = [0, 0]  # client packets per spine, from the per-EV counters: EV v = sport - 49152
    for e in r["metrics"]["ev_tx"]:
        if e["plane"] == plane - 1: want[0 if (e["sport"] - 49152) % 3 < 2 else 1] += e["packets"]
    fwd = [d(f"p{plane}s{s}", "l2") for s in (1, 2)]   # toward the server's leaf: data
    rev = [d(f"p{plane}s{s}", "l1") for s in (1, 2)]   # toward the client's leaf: SACKs
    # Stray packets on top: neighbour discovery, and on plane 1 the OOB TCP (IPv4, ECMP-hashed).
    slack = 40 + sum(want) // 200
    v = []
    for s in (0, 1):
        if not want[s] <= fwd[s] <= want[s] + slack: v.append(f"spine {s + 1}: {fwd[s]} vs {want[s]} by EV")
    if not want[0] > 1.5 * want[1]: v.append(f"the 7:3 EV split is missing: {want}")
    if not (rev[1] > 100 and rev[0] <= slack): v.append(f"SACKs not all via spine 2: {rev}")
    print(f"plane {plane}: client packets by EV path {want}, spine tx toward leaf 2 {fwd}, toward leaf 1 {rev} "
          f"{'OK' if not v else 'FAIL: ' + '; '.join(v)}")
    bad += [f"plane {plane}: {x}" for x in v]
for x in bad: print("  -", x)
sys.exit(1 if bad else 0)
PY
echo PASS
