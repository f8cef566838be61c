#!/usr/bin/env bash
# A distributed simulation run (`mpirun -n R mrc sim`, D55) against one process and against R
# threads, on this machine: the scenario runs as one process, with --threads R and under mpirun -n R,
# RUNS times back to back, and the table gives each run's time (`run.wall_s`: setting up the run to
# its end; "ext": the whole command, mpirun's start-up included), peak RSS (of the process, so over
# all its variants; per rank for mpirun),
# the bytes the ranks sent each other (in all, and the most one rank sent in one window), and
# whether the output is the same as the one-process run's (the JSON without its "run" and
# "qp_memory" blocks). Not a test.
#
#   bench/sim_ranks.sh [BUILD_DIR]      (default: build; needs BUILD_DIR/tools/mrc/mrc built with MPI)
#   env: SCENARIO=scenarios/threads_bench.toml  RANKS=2  RUNS=3
#        MPIRUN="mpirun --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none"
#        (as root, OpenMPI also needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
# Exit status 1 if a run's output differs from the one-process run's.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
MRC=${MRC_BIN:-$BUILD/tools/mrc/mrc}
SCENARIO=${SCENARIO:-$ROOT/scenarios/threads_bench.toml}
RANKS=${RANKS:-2}
RUNS=${RUNS:-3}
MPIRUN=${MPIRUN:-mpirun --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none}
PY=${MRC_PYTHON:-python3}
[[ -x $MRC ]] || { echo "sim_ranks: no mrc binary at $MRC" >&2; exit 2; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

timed() {  # out-file command...: runs it, stdout to the file, its wall time (ns) to file.t
  local out=$1; shift
  local t0 t1
  t0=$(date +%s%N)
  "$@" >"$out" || [[ $? -eq 3 ]]
  t1=$(date +%s%N)
  echo $((t1 - t0)) >"$out.t"
}

echo "scenario $(basename "$SCENARIO"), $(nproc) cores, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$RUNS"); do
  timed "$W/one.$r.json" "$MRC" sim "$SCENARIO" --json --no-progress
  timed "$W/thr.$r.json" "$MRC" sim "$SCENARIO" --json --no-progress --threads "$RANKS"
  # shellcheck disable=SC2086
  timed "$W/mpi.$r.json" $MPIRUN -n "$RANKS" "$MRC" sim "$SCENARIO" --json --no-progress
done
"$PY" - "$W" "$RUNS" "$RANKS" <<'PYEOF'
import json, sys
w, runs, ranks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(path):
    j = json.load(open(path))
    rs = [v.pop("run") for v in j["variants"]]
    for v in j["variants"]:
        v.pop("qp_memory", None)
    return j, rs, int(open(path + ".t").read()) * 1e-9
bad = False
print(f"{'how':>12} {'run':>3} {'run (s)':>8} {'ext (s)':>8} {'peak RSS (MB)':>24} {'rank MB':>8} {'max/window':>10} identical")
for r in range(1, runs + 1):
    ref, _, _ = load(f"{w}/one.{r}.json")
    for how, name in (("one process", "one"), (f"{ranks} threads", "thr"), (f"{ranks} ranks", "mpi")):
        j, rs, ext = load(f"{w}/{name}.{r}.json")
        same = j == ref
        bad |= not same
        wall = sum(x["wall_s"] for x in rs)
        rss = " / ".join(f"{m:.0f}" for m in rs[-1].get("rank_peak_rss_mb", [rs[-1]["peak_rss_mb"]]))
        sent = sum(x.get("rank_bytes", 0) for x in rs) / 1e6
        most = max(x.get("rank_window_bytes_max", 0) for x in rs) / 1e6
        print(f"{how:>12} {r:>3} {wall:>8.3f} {ext:>8.2f} {rss:>24} {sent:>8.1f} {most:>10.2f} {'yes' if same else 'NO'}")
sys.exit(1 if bad else 0)
PYEOF
