#!/usr/bin/env bash
# Speed-up of a parallel simulation run (`mrc sim --threads N`, D55) over one thread, measured in
# this invocation: the scenario runs at --threads 1 and at --threads N back to back, RUNS times,
# and the table gives each pair's wall times and ratio, then the median ratio. The machine may be
# shared, so it also prints the ratio the partitioning allows on N free cores: the windows' CPU
# time at one thread over their span at N threads (per window, the busiest thread's busy time on
# the monotonic clock, D66; `mrc sim --json`: run.window_cpu_s, run.window_span_s), which other
# load inflates only where it deschedules a thread, and splits it in two: what partitioning alone
# saves (one thread running the N partitions in turn, `--threads 1 --partitions N`, is faster than
# one Fabric: smaller event queues and working sets) and the parallel part (that run's CPU time
# over the span). Every run's output is checked to be
# identical to the one-thread run's (the JSON without its "run" block). Not a test.
#
#   bench/sim_threads.sh [BUILD_DIR]      (default: build; needs BUILD_DIR/tools/mrc/mrc)
#   env: SCENARIO=scenarios/threads_bench.toml  THREADS="2" (one or more, e.g. "2 4")  RUNS=3
# Exit status 1 if a parallel run's output differs from the one-thread run's.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
MRC=${MRC_BIN:-$BUILD/tools/mrc/mrc}
SCENARIO=${SCENARIO:-$ROOT/scenarios/threads_bench.toml}
THREADS=${THREADS:-2}
RUNS=${RUNS:-3}
PY=${MRC_PYTHON:-python3}
[[ -x $MRC ]] || { echo "sim_threads: no mrc binary at $MRC" >&2; exit 2; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

echo "scenario $(basename "$SCENARIO"), $(nproc) cores, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for n in $THREADS; do
  for r in $(seq 1 "$RUNS"); do
    "$MRC" sim "$SCENARIO" --json --no-progress --threads 1 >"$W/1.$n.$r.json" || [[ $? -eq 3 ]]
    "$MRC" sim "$SCENARIO" --json --no-progress --threads "$n" >"$W/$n.$n.$r.json" || [[ $? -eq 3 ]]
    "$MRC" sim "$SCENARIO" --json --no-progress --threads 1 --partitions "$n" >"$W/p.$n.$r.json" || [[ $? -eq 3 ]]
  done
done
"$PY" - "$W" "$RUNS" $THREADS <<'PYEOF'
import json, statistics, sys
w, runs, threads = sys.argv[1], int(sys.argv[2]), [int(t) for t in sys.argv[3:]]
def load(path):
    j = json.load(open(path))
    runs = [v.pop("run") for v in j["variants"]]
    for v in j["variants"]:
        v.pop("qp_memory", None)
    return j, runs
bad = False
print(f"{'threads':>7} {'run':>3} {'wall 1 (s)':>10} {'wall N (s)':>10} {'ratio':>6} {'cpu 1 (s)':>9} {'cpu 1xN (s)':>11} {'span N (s)':>10} {'cpu/span':>8} {'1xN/span':>8} identical")
for n in threads:
    ratios, models, parallel = [], [], []
    for r in range(1, runs + 1):
        a, ra = load(f"{w}/1.{n}.{r}.json")
        b, rb = load(f"{w}/{n}.{n}.{r}.json")
        c, rc = load(f"{w}/p.{n}.{r}.json")
        same = a == b == c and all(x["events"] == y["events"] == z["events"] for x, y, z in zip(ra, rb, rc))
        bad |= not same
        cpu1n = sum(z["window_cpu_s"] for z in rc)
        wall1 = sum(x["wall_s"] for x in ra)
        walln = sum(y["wall_s"] for y in rb)
        cpu1 = sum(x["window_cpu_s"] for x in ra)
        span = sum(y["window_span_s"] for y in rb)
        ratios.append(wall1 / walln)
        models.append(cpu1 / span)
        parallel.append(cpu1n / span)
        print(f"{n:>7} {r:>3} {wall1:>10.3f} {walln:>10.3f} {wall1 / walln:>6.2f} {cpu1:>9.3f} {cpu1n:>11.3f} {span:>10.3f} {cpu1 / span:>8.2f} {cpu1n / span:>8.2f} {'yes' if same else 'NO'}")
    print(f"{n:>7} median: wall speed-up {statistics.median(ratios):.2f}x; on {n} free cores "
          f"{statistics.median(models):.2f}x ({statistics.median(models) / statistics.median(parallel):.2f}x from partitioning, "
          f"{statistics.median(parallel):.2f}x from the threads)")
sys.exit(1 if bad else 0)
PYEOF
