# Shared by the tb_perf_*.sh tests (sourced, not run): `mrc perf` between h1 (client) and h2 (server)
# over a 2-host x 4-plane x 2-spine ecmp fabric with 1500-byte MTU, plus the checks on its JSON report
# and on the routers' packet counters. Set PREFIX and MRC (the mrc binary) before sourcing.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ -n ${MRC:-} && -x $MRC ]] || fail "usage: $0 PATH/TO/mrc (got '${MRC:-}')"
PORT=18515
# The client's time limit (s). 1 GiB took 111 s (load 6.6) and 457 s (load 9) with both cores shared by other jobs;
# CTest's TIMEOUT (CMakeLists.txt) is above this default.
PERF_TIMEOUT=${PERF_TIMEOUT:-200}
SRV_PID= CLI_PID=
kill_perf() {
  local p
  for p in $CLI_PID $SRV_PID; do kill "$p" 2>/dev/null || true; done
}
trap 'rc=$?; kill_perf; set +e; (exit $rc); cleanup' EXIT

# perf_fabric_up: brings the fabric up and sets L1 / L2 (plane addresses of h1 / h2) and SRV_OOB.
perf_fabric_up() {
  "$TB" up --hosts 2 --planes 4 --spines 2 --mode ecmp --mtu 1500
  "$TB" show --json >"$WORK/show.json"
  read -r L1 L2 < <("$PY" - "$WORK/show.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
h = {x["node"]: [p["ipv4"] for p in sorted(x["planes"], key=lambda p: p["plane"])] for x in s["host_list"]}
print(",".join(h["h1"]), ",".join(h["h2"]))
PY
)
  SRV_OOB=${L2%%,*}
}

perf_start_server() {
  : >"$WORK/srv.out"  # now, not in the child: the wait below must not read the last server's output
  "$TB" exec h2 -- timeout $((PERF_TIMEOUT + 10)) "$MRC" perf --server --once --bind "$SRV_OOB" -p $PORT --local "$L2" \
    >"$WORK/srv.out" 2>&1 &
  SRV_PID=$!
  wait_for "$WORK/srv.out" 'waiting on' "$SRV_PID"
}

# perf_start_client ARGS...: the client in the background, JSON report in $WORK/cli.json.
perf_start_client() {
  "$TB" exec h1 -- timeout "$PERF_TIMEOUT" "$MRC" perf --client "$SRV_OOB" -p $PORT --local "$L1" --remote "$L2" \
    --lat-iters 100 --json --metrics "$@" >"$WORK/cli.json" 2>"$WORK/cli.err" &
  CLI_PID=$!
}

perf_wait() {
  local rc=0 src=0
  wait "$CLI_PID" || rc=$?
  CLI_PID=
  wait "$SRV_PID" || src=$?
  SRV_PID=
  echo "client exit $rc, server exit $src; server: $(tail -n1 "$WORK/srv.out")"
  if [[ $rc -ne 0 ]]; then
    grep -v '^{"interval"' "$WORK/cli.err" >&2 || true
    partial_report
    fail "mrc perf client exited $rc$( ((rc == 124)) && echo " (killed by the time limit)")"
  fi
  [[ $src -eq 0 ]] || { cat "$WORK/srv.out" >&2; fail "mrc perf server exited $src"; }
}

# partial_report: goodput before / after the fault from the interval lines of a run that failed.
partial_report() {
  "$PY" - "$WORK" <<'PY' || true
import json, os, sys
W = sys.argv[1]
iv = [json.loads(l)["interval"] for l in open(os.path.join(W, "cli.err")) if l.startswith('{"interval"')]
if not iv: sys.exit(0)
tf = float(open(os.path.join(W, "fault.t")).read()) if os.path.exists(os.path.join(W, "fault.t")) else float("inf")
pre = [x for x in iv if x["unix_s"] <= tf]; post = [x for x in iv if x["unix_s"] > tf]
mb = lambda xs: sum(x["bytes"] for x in xs) / 2**20
g = lambda xs: sum(x["bytes"] for x in xs) * 8e-6 / max(sum(x["ms"] for x in xs), 1e-9)
print(f"partial run: before the fault {mb(pre):.0f} MiB in {sum(x['ms'] for x in pre) / 1e3:.1f} s = {g(pre):.3f} Gb/s; "
      f"after it {mb(post):.0f} MiB in {sum(x['ms'] for x in post) / 1e3:.1f} s = {g(post):.3f} Gb/s, "
      f"{sum(x['rtx'] for x in post)} retransmissions")
PY
}

# wait_rx_bytes N: returns once h2 has received N bytes on its plane interfaces since the call.
wait_rx_bytes() {
  "$TB" exec h2 -- "$PY" - "$1" "$CLI_PID" <<'PY' || fail "the transfer did not get that far"
import os, sys, time
want, pid = int(sys.argv[1]), int(sys.argv[2])
def rx():
    with open("/proc/net/dev") as f:
        return sum(int(l.split(":", 1)[1].split()[0]) for l in f.readlines()[2:] if l.split(":")[0].strip().startswith("pl"))
start = rx()
while rx() - start < want:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit(1)
    time.sleep(0.01)
PY
}

# link_down NODE IFNAME: the fault, with the time (CLOCK_REALTIME, like mrc perf's intervals) taken
# just before it into $WORK/fault.t. Counters are snapshotted just before (pre) and after (post).
link_down() {
  snap pre
  date +%s.%N >"$WORK/fault.t"
  ip -n "$PREFIX-$1" link set "$2" down
  # at the lowest priority: on 2 cores, reading every router's counters right after the fault would
  # otherwise take CPU from the transfer in the 100 ms the recovery is measured over
  nice -n 19 "$TB" counters --json >"$WORK/post.json"
  echo "fault: $1 $2 down at $(cat "$WORK/fault.t")"
}

# perf_check [--spread] [--min-bytes N] [--fault-at FILE [--recover FRACTION] --quiet-after NODE:IF:FIELD]...:
# prints the run's numbers, per-plane and per-spine packet shares (before / after the fault when
# there is one) and the goodput recovery; exits non-zero on a failed check.
perf_check() {
  "$PY" - "$WORK" "$@" <<'PY' || fail "checks failed"
import argparse, json, os, sys
ap = argparse.ArgumentParser()
ap.add_argument("work"); ap.add_argument("--spread", action="store_true")
ap.add_argument("--min-bytes", type=int, default=0); ap.add_argument("--fault-at")
ap.add_argument("--quiet-after", action="append", default=[])
ap.add_argument("--recover", type=float, default=0.9)  # fraction of the goodput before the fault
o = ap.parse_args()
W = lambda f: os.path.join(o.work, f)
r = json.load(open(W("cli.json")))
bad = []
res = r["results"][0]
moved = res["bytes"] * res["iterations"]
print(f"moved {moved / 2**20:.0f} MiB in {res['seconds']:.2f} s = {res['bw_gbps']:.3f} Gb/s, "
      f"{res['packets_per_s']:.0f} pkt/s, CPU {res['cpu_s']:.2f} s client / {r['server_cpu_s']:.2f} s server, "
      f"retransmissions {res['retransmissions']}, pmtu {r['pmtu']}, {r['evs_per_plane']} EVs/plane")
print(f"verified={r['verified']}: {r['verified_bytes']} of {r['bytes_moved']} bytes compared byte for byte, "
      f"{r['mismatched_bytes']} mismatched, {r['verification_windows']} window(s)")
if r["verified"] is not True or r["mismatched_bytes"] != 0 or r["verified_bytes"] != r["bytes_moved"]:
    bad.append("data not verified byte for byte")
if moved < o.min_bytes: bad.append(f"moved {moved} < {o.min_bytes} bytes")
for pm in r["metrics"]["planes"]:
    if pm.get("tx_dropped", 0) or pm.get("tx_no_route", 0):
        print(f"note: plane {pm['plane']} tx_dropped {pm['tx_dropped']} tx_no_route {pm['tx_no_route']}")

def nodes(f): return json.load(open(W(f + ".json")))["nodes"]
def d(a, b, node, ifn, f): return b[node]["ifaces"][ifn][f] - a[node]["ifaces"][ifn][f]
def shares(a, b, label):
    """plane share: packets h1 sent into each plane (leaf rx from h1); spine share: data toward leaf 2"""
    pl = [d(a, b, f"p{p}l1", "h1", "rx_packets") for p in (1, 2, 3, 4)]
    sp = [[d(a, b, f"p{p}s{s}", "l2", "tx_packets") for s in (1, 2)] for p in (1, 2, 3, 4)]
    tot = sum(pl)
    print(f"{label}: per plane {pl} = " + " ".join(f"{x / max(tot, 1):.1%}" for x in pl) +
          f"; per spine (toward leaf 2) {sp}")
    return pl, sp
if o.fault_at:
    shares(nodes("before"), nodes("pre"), "packets before the fault")
    _, sp_after = shares(nodes("post"), nodes("after"), "packets after the fault")
    for q in o.quiet_after:
        node, ifn, field = q.split(":")
        n = d(nodes("post"), nodes("after"), node, ifn, field)
        tot = sum(sum(x) for x in sp_after)
        print(f"after the fault {node} {ifn} {field}: {n} (of {tot} data packets through the spines)")
        if n > 0.01 * tot + 50: bad.append(f"{node} {ifn} still carried {n} packets after the fault")
else:
    pl, sp = shares(nodes("before"), nodes("after"), "packets")
    sent = sum(pm["tx_packets"] for pm in r["metrics"]["planes"])
    if o.spread:
        tot = sum(pl)
        if tot > sent * 1.05 + 800: bad.append(f"{tot} frames entered the planes for {sent} datagrams: IP fragmentation")
        for i, x in enumerate(pl):
            if x > 1.5 * tot / 4: bad.append(f"plane {i + 1} carried {x} > 1.5 x its share {tot / 4:.0f}")
            if x == 0: bad.append(f"plane {i + 1} carried nothing")
            for s, y in enumerate(sp[i]):
                if y == 0 or y > 1.5 * sum(sp[i]) / 2:
                    bad.append(f"plane {i + 1} spine {s + 1} carried {y} of {sum(sp[i])} (share {sum(sp[i]) / 2:.0f})")
    print(f"client datagrams {sent}; frames into the planes {sum(pl)}")

if o.fault_at:
    tf = float(open(o.fault_at).read())
    iv = res["intervals"]
    ms = iv[0]["ms"]
    # goodput before: mean over the last 2 s before the fault (completions are per 64 KiB message, so
    # single intervals are lumpy); back to 90 % when the mean over the next 100 ms reaches 90 % of it
    pre = [x for x in iv if tf - 2 < x["unix_s"] <= tf]
    if sum(x["ms"] for x in pre) < 1000: bad.append("less than 1 s of intervals before the fault")
    base = sum(x["bytes"] for x in pre) * 8e-6 / max(sum(x["ms"] for x in pre), 1)
    post = [x for x in iv if x["unix_s"] > tf]
    gb = lambda xs: sum(x["bytes"] for x in xs) * 8e-6 / max(sum(x["ms"] for x in xs), 1e-9)
    k = max(1, round(100 / ms))
    rec = None
    for i in range(len(post) - k + 1):
        if gb(post[i:i + k]) >= o.recover * base:
            rec = max(0.0, (post[i]["unix_s"] - post[i]["ms"] / 1e3 - tf) * 1e3)
            after = gb(post[i:])
            break
    first = gb(post[:k]) if post else 0
    print(f"goodput before the fault {base:.3f} Gb/s (last 2 s); first 100 ms after it {first:.3f} Gb/s; "
          f"intervals of {ms:.0f} ms; ", end="")
    if rec is None:
        print(f"never back to {o.recover:.0%} (after the fault {gb(post):.3f} Gb/s)")
        bad.append(f"goodput did not recover to {o.recover:.0%} of its value before the fault")
    else:
        print(f"back to >= {o.recover:.0%} (over 100 ms) {rec:.0f} ms after the fault; "
              f"from then on {after:.3f} Gb/s ({after / base:.0%} of before)")
for x in bad: print("  FAIL:", x)
sys.exit(1 if bad else 0)
PY
}
