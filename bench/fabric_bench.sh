#!/usr/bin/env bash
# fabric_bench.sh: `mrc perf` next to iperf3 TCP (1 stream) and MPTCP, on loopback and across the
# 2-host x 4-plane x 2-spine netns fabric (tools/testbed/mrc-testbed, ecmp mode, 1500-byte MTU), and
# the failover case (a spine link goes down mid-run: time until the goodput is back to 90 %).
# Not a test: it prints a table with the ratios. Method and results: docs/perf.md.
#
#   sudo bench/fabric_bench.sh [BUILD_DIR]      (default: build; needs BUILD_DIR/tools/mrc/mrc)
#   env: DURATION=5 (s per throughput run), FAILOVER=8 (s per failover run), FO_RUNS=3 (runs per
#        failover case: the fault's timing varies, the median and every run are printed), MSG=1MiB (mrc perf size),
#        GSO=8 (packets per GSO send in the `mrc perf --gso` rows), RATE=100mbit (each spine -> leaf 2
#        link in the link-bound rows)
# Needs root, iperf3 and mptcpize (both installed by ./dev).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
MRC=${MRC_BIN:-$BUILD/tools/mrc/mrc}
TB=$ROOT/tools/testbed/mrc-testbed
PY=${MRC_PYTHON:-$([[ -x /usr/bin/python3 ]] && echo /usr/bin/python3 || echo python3)}
export MRC_PYTHON=$PY
DURATION=${DURATION:-5} FAILOVER=${FAILOVER:-8} FO_RUNS=${FO_RUNS:-3} MSG=${MSG:-1MiB} GSO=${GSO:-8} RATE=${RATE:-100mbit}
export MRC_TESTBED_PREFIX=fbench GSO RATE FO_RUNS
LONS=fbench-lo
die() { echo "fabric_bench: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces)"
[[ -x $MRC ]] || die "no mrc binary at $MRC (build it: ninja -C $BUILD mrc)"
for t in iperf3 mptcpize ip; do command -v $t >/dev/null || die "'$t' not found (./dev installs it)"; done

W=$(mktemp -d)
PIDS=()
cleanup() {
  local p n
  for p in "${PIDS[@]+"${PIDS[@]}"}"; do kill "$p" 2>/dev/null || true; done
  # the servers and clients themselves (PIDS holds their wrapping subshells)
  for n in $(ip netns list | awk '$1 ~ /^fbench-/ {print $1}'); do ip netns pids "$n" | xargs -r kill 2>/dev/null || true; done
  "$TB" down >/dev/null 2>&1 || true
  ip netns del $LONS 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
inns() { local n=$1; shift; ip netns exec "$n" "$@"; }
R() { echo "$1=$2" >>"$W/results"; }  # key=value results, read by the report at the end

# ---- runners: each prints nothing, leaves its JSON in $W/<tag>.json -----------------------------
# mrc_run TAG SRV_NS SRV_LOCAL CLI_NS CLI_LOCAL SECONDS [extra client args]
mrc_run() {
  local tag=$1 sns=$2 sl=$3 cns=$4 cl=$5 secs=$6
  shift 6
  inns "$sns" timeout "$((secs + 60))" "$MRC" perf --server --once --bind "${sl%%,*}" -p 18600 --local "$sl" ${SRV_ARGS:-} >"$W/$tag.srv" 2>&1 &
  local spid=$!
  PIDS+=("$spid")
  for _ in $(seq 100); do grep -q 'waiting on' "$W/$tag.srv" && break; sleep 0.05; done
  inns "$cns" "$MRC" perf --client "${sl%%,*}" -p 18600 --local "$cl" --remote "$sl" -s "${SIZE:-$MSG}" -D "$secs" \
    --lat-iters 0 --json "$@" >"$W/$tag.json" 2>"$W/$tag.err" || die "mrc perf $tag failed: $(cat "$W/$tag.err")"
  wait "$spid" || die "mrc perf server $tag failed: $(cat "$W/$tag.srv")"
}
# iperf_run TAG SRV_NS CLI_NS DST SECONDS [mptcp]: a client that fails or does not finish within
# SECONDS + 10 is fatal, unless MAY_FAIL=1 (a TCP flow whose only path died): then it returns 1.
iperf_run() {
  local tag=$1 sns=$2 cns=$3 dst=$4 secs=$5 wrap=()
  [[ ${6:-} == mptcp ]] && wrap=(mptcpize run)
  inns "$sns" "${wrap[@]+"${wrap[@]}"}" iperf3 -s -1 -p 5299 >"$W/$tag.srv" 2>&1 &
  local spid=$! rc=0
  PIDS+=("$spid")
  sleep 0.3
  inns "$cns" timeout "$((secs + 10))" "${wrap[@]+"${wrap[@]}"}" iperf3 -c "$dst" -p 5299 -P 1 -t "$secs" -J \
    >"$W/$tag.json" 2>"$W/$tag.err" || rc=1
  # a server that missed the end of the test (black-holed path) must not hold the port for the next run
  for _ in $(seq 20); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
  local p
  for p in $(ip netns pids "$sns"); do [[ $(cat /proc/$p/comm 2>/dev/null) == iperf3 ]] && kill "$p" 2>/dev/null; done
  wait "$spid" || true
  [[ $rc == 0 || ${MAY_FAIL:-} == 1 ]] || die "iperf3 $tag failed: $(cat "$W/$tag.err")"
  return $rc
}
# sampler NS SECONDS OUT: receive bytes on NS's plane interfaces every 1 ms (CLOCK_REALTIME stamps),
# for at most SECONDS or until OUT.stop exists.
sampler() {
  rm -f "$3.stop"
  inns "$1" "$PY" - "$2" "$3" <<'PY'
import os, sys, time
end = time.time() + float(sys.argv[1])
out = []
f = open("/proc/net/dev")
while True:
    t = time.time()
    if t > end or (len(out) % 50 == 0 and os.path.exists(sys.argv[2] + ".stop")): break
    f.seek(0)
    out.append((t, sum(int(l.split(":", 1)[1].split()[0]) for l in f.readlines()[2:]
                       if l.split(":")[0].strip().startswith("pl"))))
    time.sleep(0.001)
open(sys.argv[2], "w").write("\n".join(f"{t:.6f} {b}" for t, b in out))
PY
}
# rx_flowing NS: returns once NS's plane interfaces have received 20 MB more than at the call.
rx_flowing() {
  inns "$1" "$PY" - <<'PY'
import time
def rx():
    with open("/proc/net/dev") as f:
        return sum(int(l.split(":", 1)[1].split()[0]) for l in f.readlines()[2:] if l.split(":")[0].strip().startswith("pl"))
s, end = rx(), time.time() + 30
while rx() - s < 20_000_000 and time.time() < end: time.sleep(0.01)
PY
}
spine_tx() { "$TB" counters --json | "$PY" -c 'import json,sys; n=json.load(sys.stdin)["nodes"]; print(n["p1s1"]["ifaces"]["l2"]["tx_bytes"], n["p1s2"]["ifaces"]["l2"]["tx_bytes"])'; }

# failover TAG KIND RUN: runs the flow for $FAILOVER s; once it flows (20 MB at h2) and 1 s more, a link
# goes down. KIND spine: the plane-1 spine that carried more of the flow loses its link to leaf 1
# (leaf 1 re-hashes onto the other spine at once; traffic from leaf 2 hashed onto that spine is
# black-holed there: no routing protocol). KIND plane: h1 loses its plane-2 link; the TCP flow runs on
# plane 2 for this case (MPTCP loses one subflow; plane 1 keeps the mrc perf / iperf3 control
# connections). Throughput at h2 every 1 ms.
failover() {
  local tag=$1 kind=$2 fpid a b c d sp f=fo_${2}_${1}_$3
  case $tag in
    # 64 KiB messages: completions every ~0.5 ms; one verification window for the whole run
    mrc) SIZE=64KiB mrc_run $f fbench-h2 "$L2" fbench-h1 "$L1" "$FAILOVER" --interval 5 --window 1GiB & ;;
    tcp)
      if [[ $kind == plane ]]; then MAY_FAIL=1 iperf_run $f fbench-h2 fbench-h1 10.2.2.1 "$FAILOVER" &
      else iperf_run $f fbench-h2 fbench-h1 10.1.2.1 "$FAILOVER" & fi ;;
    mptcp) iperf_run $f fbench-h2 fbench-h1 10.1.2.1 "$FAILOVER" mptcp & ;;
  esac
  fpid=$!
  sampler fbench-h2 "$((FAILOVER + 30))" "$W/$f.samples" &
  local smp=$!
  rx_flowing fbench-h2
  if [[ $kind == spine ]]; then
    read -r a b < <(spine_tx)
    sleep 1
    read -r c d < <(spine_tx)
    sp=$(((c - a) >= (d - b) ? 1 : 2))
    date +%s.%N >"$W/$f.t"
    ip -n fbench-p1s$sp link set l1 down
    R "${f}_link" "p1s$sp-l1"
  else
    sleep 1
    date +%s.%N >"$W/$f.t"
    ip -n fbench-h1 link set pl2 down
    R "${f}_link" "h1-pl2"
  fi
  # a TCP flow whose only path died ends with an error: that is the result, not a failure
  wait $fpid || [[ $kind == plane && $tag == tcp ]] || die "failover run $f failed"
  touch "$W/$f.samples.stop"
  wait $smp
  if [[ $kind == spine ]]; then "$TB" fault link-up p1s$sp l1 >/dev/null; else "$TB" fault link-up h1 pl2 >/dev/null; fi
  sleep 0.5
}

# ---- 1. loopback -------------------------------------------------------------------------------
echo "fabric_bench: loopback (namespace $LONS), ${DURATION} s per run"
ip netns del $LONS 2>/dev/null || true
ip netns add $LONS
ip -n $LONS link set lo up
mrc_run lo_mrc $LONS 127.0.1.1,127.0.2.1,127.0.3.1,127.0.4.1 $LONS 127.0.1.2,127.0.2.2,127.0.3.2,127.0.4.2 "$DURATION"
SRV_ARGS="--gso $GSO" mrc_run lo_gso $LONS 127.0.1.1,127.0.2.1,127.0.3.1,127.0.4.1 $LONS 127.0.1.2,127.0.2.2,127.0.3.2,127.0.4.2 "$DURATION" --gso "$GSO"
iperf_run lo_tcp $LONS $LONS 127.0.0.1 "$DURATION"
ip netns del $LONS

# ---- 2. the fabric -----------------------------------------------------------------------------
echo "fabric_bench: 2 hosts x 4 planes x 2 spines, ecmp, mtu 1500"
"$TB" up --hosts 2 --planes 4 --spines 2 --mode ecmp --mtu 1500 >/dev/null
L1=10.1.1.1,10.2.1.1,10.3.1.1,10.4.1.1
L2=10.1.2.1,10.2.2.1,10.3.2.1,10.4.2.1
# MPTCP: the server announces its plane 2..4 addresses; the client opens one subflow to each, routed
# over that plane, next to the initial subflow on plane 1.
for n in h1 h2; do ip -n fbench-$n mptcp limits set subflow 8 add_addr_accepted 8; done
for p in 2 3 4; do ip -n fbench-h2 mptcp endpoint add 10.$p.2.1 dev pl$p id $p signal; done
"$TB" counters --json >"$W/c0.json"
mrc_run fab_mrc fbench-h2 "$L2" fbench-h1 "$L1" "$DURATION" --metrics
"$TB" counters --json >"$W/c1.json"
SRV_ARGS="--gso $GSO" mrc_run fab_gso fbench-h2 "$L2" fbench-h1 "$L1" "$DURATION" --gso "$GSO"
iperf_run fab_tcp fbench-h2 fbench-h1 10.1.2.1 "$DURATION"
"$TB" counters --json >"$W/c2.json"
iperf_run fab_mptcp fbench-h2 fbench-h1 10.1.2.1 "$DURATION" mptcp
"$TB" counters --json >"$W/c3.json"

# ---- 3. the fabric, link-bound ------------------------------------------------------------------
# Every spine -> leaf-2 link shaped to $RATE (tbf): the links, not the 2 CPUs, are the bottleneck, as
# in a real fabric. A flow that stays on one path per plane gets one spine link of each plane it uses.
echo "fabric_bench: the fabric with every spine -> leaf 2 link limited to $RATE"
for p in 1 2 3 4; do for s in 1 2; do "$TB" fault rate p${p}s$s l2 "$RATE" >/dev/null; done; done
mrc_run lim_mrc fbench-h2 "$L2" fbench-h1 "$L1" "$DURATION" --cc nscc
iperf_run lim_tcp fbench-h2 fbench-h1 10.1.2.1 "$DURATION"
iperf_run lim_mptcp fbench-h2 fbench-h1 10.1.2.1 "$DURATION" mptcp
"$TB" fault clear >/dev/null

# ---- 4. failover -------------------------------------------------------------------------------
echo "fabric_bench: failover, ${FO_RUNS} x ${FAILOVER} s per case, a link goes down 1 s after the flow started"
for k in spine plane; do for t in mrc tcp mptcp; do for r in $(seq "$FO_RUNS"); do failover $t $k "$r"; done; done; done

# ---- report ------------------------------------------------------------------------------------
"$PY" - "$W" "$MSG" <<'PY'
import json, os, statistics, sys
W = sys.argv[1]
J = lambda f: json.load(open(os.path.join(W, f)))
res = dict(l.strip().split("=", 1) for l in open(os.path.join(W, "results")))
def mrc(tag):
    r = J(tag + ".json"); x = r["results"][0]
    assert r["verified"], tag + ": data not verified"
    return x["bw_gbps"], x["cpu_s"] + r["server_cpu_s"], x["seconds"], r
def ip3(tag):
    e = J(tag + ".json")["end"]
    cpu = e["cpu_utilization_percent"]
    secs = e["sum_received"]["seconds"]
    return e["sum_received"]["bits_per_second"] / 1e9, (cpu["host_total"] + cpu["remote_total"]) / 100 * secs, secs
def planes(a, b):
    a, b = J(a)["nodes"], J(b)["nodes"]
    v = [b[f"p{p}l2"]["ifaces"]["h2"]["tx_bytes"] - a[f"p{p}l2"]["ifaces"]["h2"]["tx_bytes"] for p in (1, 2, 3, 4)]
    t = sum(v) or 1
    return "/".join(f"{x / t:.0%}" for x in v)
lo_m, lo_mc, lo_ms, lo_r = mrc("lo_mrc"); lo_t, lo_tc, lo_ts = ip3("lo_tcp")
lo_g, lo_gc, lo_gs, _ = mrc("lo_gso"); fg_m, fg_mc, fg_ms, _ = mrc("fab_gso")
fb_m, fb_mc, fb_ms, fb_r = mrc("fab_mrc"); fb_t, fb_tc, fb_ts = ip3("fab_tcp"); fb_p, fb_pc, fb_ps = ip3("fab_mptcp")
lm_m = mrc("lim_mrc")[0]; lm_t = ip3("lim_tcp")[0]; lm_p = ip3("lim_mptcp")[0]

def recovery(tag, after=0.0):
    """(rate before, ms until >= 90 % of it, lowest bin) at the fault, or `after` s past it (a control)."""
    tf = float(open(os.path.join(W, f"{tag}.t")).read()) + after
    s = [tuple(map(float, l.split())) for l in open(os.path.join(W, f"{tag}.samples"))]
    # 5 ms bins of received bytes
    t0 = s[0][0]; bins = {}
    for (ta, ba), (tb, bb) in zip(s, s[1:]):
        bins.setdefault(int((tb - t0) / 0.005), 0)
        bins[int((tb - t0) / 0.005)] += bb - ba
    n = max(bins) + 1
    g = [bins.get(i, 0) * 8 / 0.005 / 1e9 for i in range(n)]
    fi = int((tf - t0) / 0.005)
    pre = g[max(0, fi - 200):fi]  # the last second before the fault
    base = statistics.mean(pre)
    k = 10  # 90 % must hold over 50 ms
    for i in range(fi, n - k):
        if statistics.mean(g[i:i + k]) >= 0.9 * base:
            return base, max(0.0, (t0 + i * 0.005 - tf) * 1e3), min(g[fi:fi + 20])
    return base, None, min(g[fi:fi + 20])

def mrc_goodput_recovery(f):
    r = J(f + ".json"); iv = r["results"][0]["intervals"]
    tf = float(open(os.path.join(W, f + ".t")).read())
    gb = lambda xs: sum(x["bytes"] for x in xs) * 8e-6 / sum(x["ms"] for x in xs)
    base = gb([x for x in iv if tf - 1 < x["unix_s"] <= tf]); post = [x for x in iv if x["unix_s"] > tf]; k = 20
    for i in range(len(post) - k):
        if gb(post[i:i + k]) >= 0.9 * base:
            return max(0.0, (post[i]["unix_s"] - post[i]["ms"] / 1e3 - tf) * 1e3)
    return None

print()
print("| case | mrc perf | iperf3 TCP -P1 | MPTCP (4 planes) | ratio |")
print("|---|---|---|---|---|")
print(f"| loopback, Gb/s | {lo_m:.2f} | {lo_t:.2f} | - | MRC/TCP {lo_m / lo_t:.2f}x (goal >= 1.0) |")
print(f"| loopback, CPU s per GB | {lo_mc / (lo_m * lo_ms / 8):.2f} | {lo_tc / (lo_t * lo_ts / 8):.2f} | - | |")
print(f"| loopback, mrc perf --gso {os.environ.get('GSO', '8')}, Gb/s | {lo_g:.2f} | {lo_t:.2f} | - | MRC/TCP {lo_g / lo_t:.2f}x; CPU s per GB {lo_gc / (lo_g * lo_gs / 8):.2f} |")
print(f"| fabric, Gb/s | {fb_m:.2f} | {fb_t:.2f} | {fb_p:.2f} | MRC/MPTCP {fb_m / fb_p:.2f}x (goal >= 1.5), MRC/TCP {fb_m / fb_t:.2f}x |")
print(f"| fabric, mrc perf --gso, Gb/s | {fg_m:.2f} | {fb_t:.2f} | {fb_p:.2f} | MRC/MPTCP {fg_m / fb_p:.2f}x, MRC/TCP {fg_m / fb_t:.2f}x; CPU s per GB {fg_mc / (fg_m * fg_ms / 8):.2f} |")
print(f"| fabric, CPU s per GB | {fb_mc / (fb_m * fb_ms / 8):.2f} | {fb_tc / (fb_t * fb_ts / 8):.2f} | {fb_pc / (fb_p * fb_ps / 8):.2f} | |")
print(f"| fabric, bytes per plane (leaf 2 -> h2) | {planes('c0.json', 'c1.json')} | {planes('c1.json', 'c2.json')} | {planes('c2.json', 'c3.json')} | |")
print(f"| fabric, spine -> leaf 2 links at {os.environ['RATE']}, Gb/s | {lm_m:.2f} (cc nscc) | {lm_t:.2f} | {lm_p:.2f} | MRC/MPTCP {lm_m / lm_p:.2f}x, MRC/TCP {lm_m / lm_t:.2f}x |")
runs = range(1, int(os.environ["FO_RUNS"]) + 1)
def ms_list(xs):
    med = statistics.median(x if x is not None else float("inf") for x in xs)
    return (f"median {med:.0f} ms" if med != float("inf") else "median: never") + " (runs " + \
        " / ".join("%.0f" % x if x is not None else "never" for x in xs) + " ms)"
for kind, what in (("spine", "spine link"), ("plane", "h1's plane-2 link")):
    cells = []
    for t in ("mrc", "tcp", "mptcp"):
        rs = [recovery(f"fo_{kind}_{t}_{n}") for n in runs]
        cells.append(ms_list([x[1] for x in rs]) + f"; before {statistics.mean(x[0] for x in rs):.2f} Gb/s, "
                     f"lowest 5 ms bin after {min(x[2] for x in rs):.2f}; "
                     + ", ".join(sorted({res[f"fo_{kind}_{t}_{n}_link"] for n in runs})) + " down")
    print(f"| failover: {what} down -> >= 90 % (rx at h2, 5 ms bins, 50 ms hold) | {cells[0]} | {cells[1]} | {cells[2]} | goal MRC < 5 ms |")
    print(f"| failover ({what}), MRC goodput from its 5 ms completion intervals (100 ms hold) | "
          f"{ms_list([mrc_goodput_recovery(f'fo_{kind}_mrc_{n}') for n in runs])} | | | |")
    # The same measure where nothing happens: every 0.5 s after the fault in the MRC runs (the flow
    # already on its remaining paths). What it reports there is the rate's own wander (a CPU-bound
    # flow on a shared machine), not recovery.
    ctl = []
    for n in runs:
        tag = f"fo_{kind}_mrc_{n}"
        # while the flow runs (its last completion interval), not into the sampler's tail
        last = min(float(open(os.path.join(W, f"{tag}.samples")).read().split()[-2]),
                   J(tag + ".json")["results"][0]["intervals"][-1]["unix_s"])
        tf = float(open(os.path.join(W, f"{tag}.t")).read())
        ctl += [recovery(tag, d / 2)[1] for d in range(1, 20) if tf + d / 2 + 0.3 < last]
    slow = [x for x in ctl if x is None or x > 20]
    print(f"| control: the same measure at instants without a fault (MRC runs, every 0.5 s after the fault) | "
          f"{len(ctl)} instants: {sum(1 for x in ctl if x is None or x > 5)} over 5 ms, {len(slow)} over 20 ms"
          + (f" (worst {'never' if None in slow else '%.0f ms' % max(slow)})" if slow else "") + " | | | the measure's own noise |")
r = fb_r
print(f"\nmrc perf on the fabric: pmtu {r['pmtu']} (loopback {lo_r['pmtu']}), {r['evs_per_plane']} EVs/plane, {sys.argv[2]} WRITEs, 1 QP, "
      f"every byte verified ({r['verified_bytes']} bytes on the fabric run); load average {os.getloadavg()[0]:.1f}")
PY
