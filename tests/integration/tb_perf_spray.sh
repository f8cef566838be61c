#!/usr/bin/env bash
# (g) `mrc perf` over the fabric, ecmp mode, 2 hosts x 4 planes x 2 spines: server in h2, client in
# h1 with the per-plane addresses of `show --json`, 256 MiB of RDMA WRITEs (1 MiB x 256). The run must
# exit 0 and report "verified": true; every plane and every spine must carry the MRC datagrams, no spine
# more than 1.5x its share, and no IP fragmentation (frames on the wire ~= datagrams sent).
# Usage: tb_perf_spray.sh PATH/TO/mrc   (CMake passes $<TARGET_FILE:mrc>)
# The fabric runs with --mtu 9000: mrc perf's default 4096-byte payload does not fit a 1500-byte MTU,
# the kernel then fragments it, and non-first fragments carry no UDP ports, so ECMP hashes every
# fragment of a plane onto ONE spine (measured: [650, 49531]). --evs 64: with the default 8 EVs per
# plane a 7:1 hash split (> 1.5x share) happens by chance on ~7 % of planes.
PREFIX=mrctp
MRC=${1:-${MRC_BIN:-}}
source "$(dirname "$0")/lib.sh"
[[ -n $MRC && -x $MRC ]] || fail "usage: $0 PATH/TO/mrc (got '${MRC}')"
SIZE=1MiB ITERS=256 EVS=64 PORT=18515
SRV_PID= CLI_PID=
kill_perf() {
  local p
  for p in $CLI_PID $SRV_PID; do kill "$p" 2>/dev/null || true; done
}
trap 'rc=$?; kill_perf; set +e; (exit $rc); cleanup' EXIT

"$TB" up --hosts 2 --planes 4 --spines 2 --mode ecmp --mtu 9000
"$TB" show --json >"$WORK/show.json"
read -r L1 L2 < <("$PY" - "$WORK/show.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
h = {x["node"]: [p["ipv4"] for p in sorted(x["planes"], key=lambda p: p["plane"])] for x in s["host_list"]}
assert len(h["h1"]) == 4 and len(h["h2"]) == 4, h
print(",".join(h["h1"]), ",".join(h["h2"]))
PY
)
SRV_OOB=${L2%%,*}
echo "client planes $L1 -> server planes $L2 (OOB $SRV_OOB:$PORT)"

"$TB" exec h2 -- timeout 60 "$MRC" perf --server --once --bind "$SRV_OOB" -p $PORT --local "$L2" \
  >"$WORK/srv.out" 2>&1 &
SRV_PID=$!
wait_for "$WORK/srv.out" 'waiting on' "$SRV_PID"

snap before
T0=$(date +%s.%N)
rc=0
"$TB" exec h1 -- timeout 50 "$MRC" perf --client "$SRV_OOB" -p $PORT --local "$L1" --remote "$L2" \
  -s $SIZE -n $ITERS --evs $EVS --lat-iters 100 --json --metrics >"$WORK/cli.json" 2>"$WORK/cli.err" || rc=$?
T1=$(date +%s.%N)
snap after
src=0; wait "$SRV_PID" || src=$?; SRV_PID=
echo "client exit $rc, server exit $src, wall $("$PY" -c "print(round($T1-$T0,2))") s; server: $(tail -n1 "$WORK/srv.out")"
[[ $rc -eq 0 ]] || { cat "$WORK/cli.err" >&2; fail "mrc perf client exited $rc"; }
[[ $src -eq 0 ]] || { cat "$WORK/srv.out" >&2; fail "mrc perf server exited $src"; }

"$PY" - "$WORK/cli.json" "$WORK/before.json" "$WORK/after.json" $ITERS <<'PY' || fail "perf result / spraying"
import json, sys
r = json.load(open(sys.argv[1])); iters = int(sys.argv[4])
a = json.load(open(sys.argv[2]))["nodes"]; b = json.load(open(sys.argv[3]))["nodes"]
bad = []
def d(node, ifn, f="tx_packets"): return b[node]["ifaces"][ifn][f] - a[node]["ifaces"][ifn][f]
res = r["results"][0]
total = res["bytes"] * res["iterations"] * r["qps"]
print(f"verified={r['verified']} verified_bytes_per_qp={r.get('verified_bytes_per_qp')} moved {total / 2**20:.0f} MiB "
      f"in {res['seconds']:.2f} s = {res['bw_gbps']:.3f} Gb/s, {res['packets_per_s']:.0f} pkt/s, "
      f"packets {res['packets']}, retransmissions {res['retransmissions']}")
if r.get("verified") is not True: bad.append("run not verified")
if res["iterations"] != iters or total < 256 * 2**20: bad.append(f"moved only {total} bytes")
planes = sorted(r["metrics"]["planes"], key=lambda p: p["plane"])
if len(planes) != 4: bad.append(f"{len(planes)} planes in metrics")
for i, pm in enumerate(planes):
    p = i + 1
    sent = pm["tx_packets"]
    host = d("h1", f"pl{p}")
    sp = [d(f"p{p}s{s}", "l2") for s in (1, 2)]
    share = sum(sp) / 2
    v = []
    if sent < total / 4 / 4096 * 0.5: v.append(f"plane carried only {sent} datagrams")
    if host > sent * 1.05 + 200: v.append(f"{host} frames for {sent} datagrams: IP fragmentation")
    if sum(sp) < sent * 0.95: v.append(f"only {sum(sp)} of {sent} crossed the spines")
    if min(sp) <= 0: v.append("a spine carried nothing")
    if max(sp) > 1.5 * share: v.append(f"a spine carried {max(sp)} > 1.5 x share {share:.0f}")
    if pm.get("tx_dropped", 0) or pm.get("tx_no_route", 0): v.append(f"tx_dropped {pm['tx_dropped']} no_route {pm['tx_no_route']}")
    print(f"plane {p} ({pm['address']}): client datagrams {sent}, h1 pl{p} frames {host}, "
          f"spine tx toward leaf 2 {sp} (share {share:.0f}) {'OK' if not v else 'FAIL: ' + '; '.join(v)}")
    bad += [f"plane {p}: {x}" for x in v]
for x in bad: print("  -", x)
sys.exit(1 if bad else 0)
PY
echo PASS
