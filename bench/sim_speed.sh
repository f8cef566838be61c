#!/usr/bin/env bash
# Simulator speed against the reference: the 1024-host, 128-EV permutation (docs/htsim.md §4, C1a,
# htsim's own perm_1024n_1024c_0u_2000000b.cm, k=16 fat tree, 2 MB flows) run by `mrc sim` and by
# uet-htsim's htsim_uec on this machine, alternately, in the same invocation.
#
#   bench/sim_speed.sh [--mrc PATH] [--htsim PATH | --htsim-src GITDIR] [--runs N] [--hosts 128|1024]
#
#   --mrc        the mrc binary (default: build/tools/mrc/mrc)
#   --htsim      an htsim_uec binary
#   --htsim-src  a uet-htsim git repository: commit 40ccb05 is exported to a temporary directory and
#                htsim_uec is built there with one job (about 4 minutes of one core)
#   --runs       runs of each simulator (default 1); the best of each is compared
#   --hosts      1024 (default) or 128 (the smoke-test matrix)
#
# The matrix is read from scenarios/cm/ (gitignored: it is htsim's data, not ours); when it is
# missing and --htsim-src is given it is exported from that repository (scenarios/README.md).
# Prints, per simulator, wall time, CPU time (user + sys), peak RSS and finished flows, then the
# ratios htsim / mrc. The machine is shared, so CPU time is the steadier speed figure; both ratios
# are printed. Exit status 1 if either simulator did not finish every flow.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MRC=$ROOT/build/tools/mrc/mrc
HTSIM=""
HTSIM_SRC=""
RUNS=1
HOSTS=1024
while [ $# -gt 0 ]; do
  case $1 in
    --mrc) MRC=$2; shift 2 ;;
    --htsim) HTSIM=$2; shift 2 ;;
    --htsim-src) HTSIM_SRC=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --hosts) HOSTS=$2; shift 2 ;;
    *) echo "sim_speed.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $HOSTS in
  1024) CM=perm_1024n_1024c_0u_2000000b.cm; SCEN=perm1024 ;;
  128) CM=perm_128n_128c_2MB.cm; SCEN=perm128 ;;
  *) echo "sim_speed.sh: --hosts must be 128 or 1024" >&2; exit 2 ;;
esac
HTSIM_COMMIT=40ccb0526bb6297eeb22ab33f9934fb35278dbaf
WORK=$(mktemp -d /tmp/sim_speed.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

[ -x "$MRC" ] || { echo "sim_speed.sh: no mrc binary at $MRC (build it or pass --mrc)" >&2; exit 2; }
if [ ! -f "$ROOT/scenarios/cm/$CM" ]; then
  [ -n "$HTSIM_SRC" ] || { echo "sim_speed.sh: scenarios/cm/$CM missing; pass --htsim-src" >&2; exit 2; }
  mkdir -p "$ROOT/scenarios/cm"
  git -C "$HTSIM_SRC" show "$HTSIM_COMMIT:htsim/sim/datacenter/connection_matrices/$CM" >"$ROOT/scenarios/cm/$CM"
fi
if [ -z "$HTSIM" ]; then
  [ -n "$HTSIM_SRC" ] || { echo "sim_speed.sh: pass --htsim or --htsim-src" >&2; exit 2; }
  echo "building htsim_uec from $HTSIM_SRC ($HTSIM_COMMIT) in $WORK (one job)..."
  git -C "$HTSIM_SRC" archive "$HTSIM_COMMIT" htsim/sim | tar -x -C "$WORK"
  cmake -S "$WORK/htsim/sim" -B "$WORK/hb" -DCMAKE_BUILD_TYPE=Release >"$WORK/cmake.log"
  cmake --build "$WORK/hb" --parallel 1 --target htsim_uec >"$WORK/build.log"
  HTSIM=$WORK/hb/datacenter/htsim_uec
fi
[ -x "$HTSIM" ] || { echo "sim_speed.sh: no htsim_uec at $HTSIM" >&2; exit 2; }
[ -x "$MRC" ] || { echo "sim_speed.sh: no mrc at $MRC" >&2; exit 2; }
# Both run from $WORK: relative paths given on the command line must not break.
HTSIM=$(realpath "$HTSIM")
MRC=$(realpath "$MRC")

# One timed run: name, command... -> "wall cpu rss_kb" on stdout, program output in $WORK/<name>.out
timed() {
  local name=$1; shift
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/$name.time" "$@" >"$WORK/$name.out" 2>&1 || true
  awk '{printf "%s %.2f %s\n", $1, $2 + $3, $4}' "$WORK/$name.time"
}

best_h=""; best_m=""
for i in $(seq "$RUNS"); do
  # htsim: docs/htsim.md §1, C1a (spray over 128 EVs, sender CC only, 2 ms cap).
  (cd "$WORK" && timed htsim "$HTSIM" -tm "$ROOT/scenarios/cm/$CM" -sender_cc_only -paths 128 -end 2000 \
    -o "$WORK/htsim.log") >"$WORK/h.t"
  h_done=$(grep -c "finished at" "$WORK/htsim.out" || true)
  read -r hw hc hr <"$WORK/h.t"
  echo "run $i htsim_uec: wall ${hw} s  cpu ${hc} s  peak RSS $((hr / 1024)) MB  finished ${h_done}/${HOSTS}"
  (cd "$WORK" && timed mrc "$MRC" sim --no-progress --json "$ROOT/scenarios/$SCEN.toml") >"$WORK/m.t"
  m_done=$(python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["variants"][0]; print(v["finished"])' \
    "$WORK/mrc.out" 2>/dev/null || echo 0)
  read -r mw mc mr <"$WORK/m.t"
  echo "run $i mrc sim:   wall ${mw} s  cpu ${mc} s  peak RSS $((mr / 1024)) MB  finished ${m_done}/${HOSTS}"
  python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["variants"][0]; f=v["fct_us"]; r=v["run"]
print("    mrc: FCT us min/p50/p99/max %.1f / %.1f / %.1f / %.1f  events %d (%.2f M/s)" % (
    f["min"], f["p50"], f["p99"], f["max"], r["events"], r["events_per_s"] / 1e6))' "$WORK/mrc.out" || true
  if [ -z "$best_h" ] || awk "BEGIN{exit !($hc < ${best_h#* })}"; then best_h="$hw $hc $hr"; fi
  if [ -z "$best_m" ] || awk "BEGIN{exit !($mc < ${best_m#* })}"; then best_m="$mw $mc $mr"; fi
done
read -r hw hc hr <<<"$best_h"
read -r mw mc mr <<<"$best_m"
awk -v hw="$hw" -v hc="$hc" -v hr="$hr" -v mw="$mw" -v mc="$mc" -v mr="$mr" -v n="$HOSTS" 'BEGIN {
  printf "perm-%d, 128 EVs, best of runs: htsim wall %.2f s cpu %.2f s %.0f MB | mrc wall %.2f s cpu %.2f s %.0f MB\n",
         n, hw, hc, hr / 1024, mw, mc, mr / 1024
  printf "speed-up (htsim / mrc): wall %.2fx  cpu %.2fx   memory ratio (mrc / htsim): %.2f\n",
         hw / mw, hc / mc, mr / hr
}'
[ "$h_done" = "$HOSTS" ] && [ "$m_done" = "$HOSTS" ]
