#!/usr/bin/env bash
# Unmodified perftest over software MRC across the 2-host x 4-plane x 2-spine netns fabric (1500-byte
# MTU; issue 17): ib_write_bw and ib_write_lat under `mrc exec`, each side's device on its host's
# four plane addresses and the peer's planes in --peers (the program itself exchanges one GID). In
# each run h1 loses its plane-2 link part-way through (restored before the next run); the programs
# must complete and print their rows (sizes, iteration counts, non-zero figures). Then -a sweeps on
# the healed fabric. Prints ib_write_bw's figures next to `mrc perf`'s at the same size.
PREFIX=mrcxp
MRC=${1:-${MRC_BIN:-}}
[[ -n $MRC && -x $MRC ]] || { echo "FAIL: usage: $0 PATH/TO/mrc (got '$MRC')"; exit 1; }
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/perftest_lib.sh"
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
SRV_PEERS=$L1 CLI_PEERS=$L2  # each side's --peers names the other host's planes

# fault_after BYTES: in the background, h1's plane-2 link goes down once h2 has received BYTES on
# its plane interfaces (early in the run, whatever the machine's speed); FAULT_PID, $WORK/fault.t.
fault_after() {
  (
    "$TB" exec h2 -- "$PY" - "$1" <<'PY'
import sys, time
want = int(sys.argv[1])
def rx():
    with open("/proc/net/dev") as f:
        return sum(int(l.split(":", 1)[1].split()[0]) for l in f.readlines()[2:] if l.split(":")[0].strip().startswith("pl"))
start, t0 = rx(), time.time()
while rx() - start < want and time.time() - t0 < 100:
    time.sleep(0.005)
PY
    date +%s.%N >"$WORK/fault.t"
    ip -n "$PREFIX-h1" link set pl2 down
    echo "fault: h1 pl2 down at $(cat "$WORK/fault.t")"
  ) &
  FAULT_PID=$!
}
# heal NAME: the fault must have come before run NAME's client ended; then the link comes back.
heal() {
  wait "$FAULT_PID"
  "$PY" -c 'import sys; f, e = (float(open(x).read()) for x in sys.argv[1:]); sys.exit(0 if f < e else 1)' \
    "$WORK/fault.t" "$WORK/$1.end" || fail "$1: the plane went down only after the run (no fault mid-run)"
  "$TB" fault link-up h1 pl2
}
# unfault: after an attempt pt_run retries (perftest's calibration failed), the link comes back.
unfault() { wait "$FAULT_PID"; "$TB" fault link-up h1 pl2; }
H1="$TB exec h1 --" H2="$TB exec h2 --"

PT_ARM="fault_after $((16 << 20))" PT_DISARM=unfault \
  pt_run bw "$H2" "$H1" "mrc0=$L2" "mrc0=$L1" "$SRV_OOB" ib_write_bw -s 65536 -n 2000 --report_gbits
heal bw
pt_rows bw bw --sizes 65536 --iters 2000
grep -q 'Mtu *: 1024\[B\]' "$WORK/bw.cli" || { grep Mtu "$WORK/bw.cli"; fail "the path MTU should fit the 1500-byte links (1024)"; }

PT_ARM="fault_after $((64 << 10))" PT_DISARM=unfault \
  pt_run lat "$H2" "$H1" "mrc0=$L2" "mrc0=$L1" "$SRV_OOB" ib_write_lat -s 4096 -n 2000
heal lat
pt_rows lat lat --sizes 4096 --iters 2000

pt_run bwa "$H2" "$H1" "mrc0=$L2" "mrc0=$L1" "$SRV_OOB" ib_write_bw -a -n 5 --report_gbits
pt_rows bwa bw --sweep --iters 5
pt_run lata "$H2" "$H1" "mrc0=$L2" "mrc0=$L1" "$SRV_OOB" ib_write_lat -a -n 5
pt_rows lata lat --sweep --iters 5

# mrc perf on the same fabric and size, for comparison (no fault).
$H2 timeout 120 "$MRC" perf --server --once --bind "$SRV_OOB" -p 18515 --local "$L2" >"$WORK/perf.srv" 2>&1 &
PERF_SRV=$!
wait_for "$WORK/perf.srv" 'waiting on' "$PERF_SRV"
$H1 timeout 120 "$MRC" perf --client "$SRV_OOB" -p 18515 --local "$L1" --remote "$L2" -s 64KiB -n 2000 --json \
  >"$WORK/perf.json" 2>"$WORK/perf.err" || { cat "$WORK/perf.err"; fail "mrc perf failed"; }
wait "$PERF_SRV" || true
"$PY" - "$WORK/bw.json" "$WORK/perf.json" <<'PY'
import json, sys
bw = json.load(open(sys.argv[1]))[0]
p = json.load(open(sys.argv[2]))["results"][0]
print(f"64 KiB WRITEs h1 -> h2, 4 planes: ib_write_bw via mrc exec {bw['bw_avg_gbps']:.3f} Gb/s average "
      f"(with plane 2 lost mid-run), mrc perf {p['bw_gbps']:.3f} Gb/s (no fault)")
PY
echo PASS
