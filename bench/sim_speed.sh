#!/usr/bin/env bash
# Simulator speed and memory against the reference on identical inputs: every workload's .cm matrix
# is run by `mrc sim` and by uet-htsim's htsim_uec (docs/htsim.md: its default UEC network, 128 EVs,
# sender CC only), one after the other in the same invocation, and a ratio table is printed.
#
#   bench/sim_speed.sh [--mrc PATH] [--htsim PATH | --htsim-src GITDIR] [--runs N]
#                      [--paired | --alternate] [--threads N] [--workloads LIST | --all]
#
#   --mrc        the mrc binary (default: build/tools/mrc/mrc; build-pgo/tools/mrc/mrc is the same
#                program with profile-guided optimisation, `./dev pgo`: 10-13 % fewer instructions)
#   --htsim      an htsim_uec binary
#   --htsim-src  a uet-htsim git repository: commit 40ccb05 is exported to a temporary directory and
#                htsim_uec is built there with one job (about 4 minutes of one core); it also
#                supplies htsim's incast_128.cm
#   neither      htsim is skipped (said so in the table); mrc's figures are still printed
#   --runs       runs of each simulator (default 1); the best CPU time of each is compared
#   --paired     each run starts htsim and mrc at the same moment, each pinned to its own core (the
#                cores swap every run), and the speed-up is the geometric mean over the runs of the
#                ratio within a run: on a shared machine, whose speed drifts by tens of percent from
#                one minute to the next, both then run under the same conditions (they share the
#                memory bandwidth and the last-level cache), and where one core is slower than the
#                other (by up to half, seen), an even number of runs puts each simulator on each
#                core equally often: the geometric mean cancels that factor, a median may not.
#                Needs 2 cores and taskset. Running together, they also slow each other down
#                (shared cache, memory bandwidth), by amounts that differ by workload.
#   --alternate  each run starts htsim and mrc one after the other on the same core (the last one),
#                the order swapped every run; the speed-up is the geometric mean of the ratios
#                within a run. Each simulator has the machine to itself, as a user's run would;
#                neighbouring runs share the machine's drift. Needs taskset. (docs/htsim.md §6
#                compares the two on one machine.) With either, each workload's line of ratios
#                ends with a 95 % interval of their geometric mean: on a shared machine about
#                +-19 % wide with 8 runs, +-5 % with 64 (docs/htsim.md §6).
#   --threads    `mrc sim --threads N` (default 1; htsim has one thread): then wall_x is the figure
#                that compares what a user waits for; cpu_x then also counts the threads' spinning
#                at the window barriers. Not with --paired.
#   --workloads  comma-separated, from the list below (default perm128,incast128,a2a64,a2a128)
#   --all        every workload (adds perm1024 and a2a256: minutes per run)
#
# Workloads (matrices in scenarios/cm/, gitignored, written here when missing):
#   perm128    permutation, 128 hosts (k=8), 2 MB    htsim's perm_128n_128c_2MB.cm (tools/cm/gen_permutation.py)
#   perm1024   permutation, 1024 hosts (k=16), 2 MB  htsim's perm_1024n_1024c_0u_2000000b.cm (same)
#   incast128  127 -> 1, 128 hosts, 2 MB             htsim's incast_128.cm (needs --htsim-src once)
#   a2a64      all-to-all, hosts 0-63 of k=8, 1 MB per pair       (tools/cm/gen_all_to_all.py)
#   a2a128     all-to-all, 128 hosts (k=8), 64 KB per pair, 16,256 flows
#   a2a256     all-to-all, hosts 0-255 of k=16, 16 KB per pair, 65,280 flows
#
# Per workload and simulator: wall time, CPU time (user + sys), peak RSS (/usr/bin/time), finished
# flows and FCT p50 / max; then htsim / mrc for time, mrc / htsim for memory. The machine is
# shared, so CPU time is the steadier speed figure (measured to the microsecond, from the child's
# rusage). Exit status 1 if a simulator that ran did not finish every flow.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MRC=$ROOT/build/tools/mrc/mrc
HTSIM=""
HTSIM_SRC=""
RUNS=1
PAIRED=0
ALTERNATE=0
THREADS=1
WORKLOADS=perm128,incast128,a2a64,a2a128
while [ $# -gt 0 ]; do
  case $1 in
    --mrc) MRC=$2; shift 2 ;;
    --htsim) HTSIM=$2; shift 2 ;;
    --htsim-src) HTSIM_SRC=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --paired) PAIRED=1; shift ;;
    --alternate) ALTERNATE=1; shift ;;
    --threads) THREADS=$2; shift 2 ;;
    --workloads) WORKLOADS=$2; shift 2 ;;
    --all) WORKLOADS=perm128,perm1024,incast128,a2a64,a2a128,a2a256; shift ;;
    *) echo "sim_speed.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ "$THREADS" =~ ^[1-9][0-9]*$ ]] || { echo "sim_speed.sh: --threads needs a positive integer" >&2; exit 2; }
if [ "$PAIRED" = 1 ] && [ "$ALTERNATE" = 1 ]; then
  echo "sim_speed.sh: --paired or --alternate, not both" >&2; exit 2
fi
if { [ "$PAIRED" = 1 ] || [ "$ALTERNATE" = 1 ]; } && [ "$THREADS" != 1 ]; then
  echo "sim_speed.sh: --paired and --alternate pin mrc to one core: not with --threads" >&2; exit 2
fi
HTSIM_COMMIT=40ccb0526bb6297eeb22ab33f9934fb35278dbaf
CM_DIR=$ROOT/scenarios/cm
WORK=$(mktemp -d /tmp/sim_speed.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

[ -x "$MRC" ] || { echo "sim_speed.sh: no mrc binary at $MRC (build it or pass --mrc)" >&2; exit 2; }
MRC=$(realpath "$MRC")
if [ -z "$HTSIM" ] && [ -n "$HTSIM_SRC" ]; then
  echo "building htsim_uec from $HTSIM_SRC ($HTSIM_COMMIT) in $WORK (one job)..."
  git -C "$HTSIM_SRC" archive "$HTSIM_COMMIT" htsim/sim | tar -x -C "$WORK"
  cmake -S "$WORK/htsim/sim" -B "$WORK/hb" -DCMAKE_BUILD_TYPE=Release >"$WORK/cmake.log"
  cmake --build "$WORK/hb" --parallel 1 --target htsim_uec >"$WORK/build.log"
  HTSIM=$WORK/hb/datacenter/htsim_uec
fi
if [ -n "$HTSIM" ]; then
  [ -x "$HTSIM" ] || { echo "sim_speed.sh: no htsim_uec at $HTSIM" >&2; exit 2; }
  HTSIM=$(realpath "$HTSIM")
else
  echo "sim_speed.sh: no --htsim or --htsim-src given: htsim is skipped, mrc runs alone"
fi
if [ "$PAIRED" = 1 ]; then
  [ -n "$HTSIM" ] || { echo "sim_speed.sh: --paired needs htsim" >&2; exit 2; }
  [ $((RUNS % 2)) = 0 ] ||
    echo "sim_speed.sh: --paired with an odd --runs: one core gets one run more of each (its speed is not cancelled)"
  command -v taskset >/dev/null || { echo "sim_speed.sh: --paired needs taskset (util-linux)" >&2; exit 2; }
  [ "$(nproc)" -ge 2 ] || { echo "sim_speed.sh: --paired needs 2 cores" >&2; exit 2; }
fi
if [ "$ALTERNATE" = 1 ]; then
  [ -n "$HTSIM" ] || { echo "sim_speed.sh: --alternate needs htsim" >&2; exit 2; }
  command -v taskset >/dev/null || { echo "sim_speed.sh: --alternate needs taskset (util-linux)" >&2; exit 2; }
fi
# A ratio within each run: both simulators ran under the same conditions.
WITHIN=$((PAIRED | ALTERNATE))

# workload -> "cm-file k htsim-end-us"
spec() {
  case $1 in
    perm128) echo "perm_128n_128c_2MB.cm 8 2000" ;;
    perm1024) echo "perm_1024n_1024c_0u_2000000b.cm 16 2000" ;;
    incast128) echo "incast_128.cm 8 30000" ;;
    a2a64) echo "a2a_64n_1MB.cm 8 20000" ;;
    a2a128) echo "a2a_128n_64KB.cm 8 20000" ;;
    a2a256) echo "a2a_256n_16KB.cm 16 20000" ;;
    *) echo "sim_speed.sh: unknown workload $1" >&2; exit 2 ;;
  esac
}

# Writes the workload's matrix into scenarios/cm/ if missing; false (with a message) if it cannot.
make_cm() {
  local w=$1 cm=$2
  [ -f "$CM_DIR/$cm" ] && return 0
  case $w in
    perm*) python3 "$ROOT/tools/cm/gen_permutation.py" --dir "$CM_DIR" >/dev/null ;;
    a2a64) python3 "$ROOT/tools/cm/gen_all_to_all.py" "$CM_DIR/$cm" 64 1000000 --network 128 >/dev/null ;;
    a2a128) python3 "$ROOT/tools/cm/gen_all_to_all.py" "$CM_DIR/$cm" 128 65536 >/dev/null ;;
    a2a256) python3 "$ROOT/tools/cm/gen_all_to_all.py" "$CM_DIR/$cm" 256 16384 --network 1024 >/dev/null ;;
    incast*)
      if [ -z "$HTSIM_SRC" ]; then
        echo "  $w: scenarios/cm/$cm missing (htsim's file: pass --htsim-src once); skipped"
        return 1
      fi
      mkdir -p "$CM_DIR"
      git -C "$HTSIM_SRC" show "$HTSIM_COMMIT:htsim/sim/datacenter/connection_matrices/$cm" >"$CM_DIR/$cm" ;;
  esac
}

# The scenario `mrc sim` runs: htsim's default UEC network (docs/htsim.md §2), MRC over 128 EVs.
source "$ROOT/tools/cm/htsim_net.sh"

# mrc's timed run -> $WORK/m.t (mrc's program output in $WORK/m_<workload>.out).
run_mrc() {
  (cd "$WORK" && timed "m_$1" "${mpin[@]}" "$MRC" sim --no-progress --json --threads "$THREADS" "$WORK/$1.toml") >"$WORK/m.t"
}

# One timed run: name, command... -> "wall cpu rss_kb"; program output in $WORK/<name>.out. CPU
# is user + system to the microsecond (wait4 of /usr/bin/time, which includes the program it
# waited for); the peak RSS is /usr/bin/time's (its small fork execs the program: a python
# child's would count python's own pages from before the exec).
timed() {
  local name=$1; shift
  python3 - "$WORK/$name.out" "$WORK/$name.rss" "$@" <<'PY'
import os, subprocess, sys, time
with open(sys.argv[1], "wb") as out:
    t0 = time.monotonic()
    p = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", sys.argv[2]] + sys.argv[3:], stdout=out,
                         stderr=subprocess.STDOUT)
    _, _, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
print("%.3f %.3f %s" % (wall, ru.ru_utime + ru.ru_stime, open(sys.argv[2]).read().split()[-1]))
PY
}

# FCT p50 / max (us) of htsim's "finished at" lines.
htsim_fct() {
  grep "finished at" "$1" | sed 's/.*finished at \([0-9.]*\).*/\1/' | sort -n |
    awk '{a[NR]=$1} END {if (NR == 0) {print "- -"; exit} i = int(NR * 0.5 + 0.999); print a[i], a[NR]}'
}

status=0
ROWS=$WORK/rows
: >"$ROWS"
IFS=, read -r -a LIST <<<"$WORKLOADS"
for w in "${LIST[@]}"; do
  read -r cm k end <<<"$(spec "$w")"
  make_cm "$w" "$cm" || continue
  flows=$(awk 'NR == 2 {print $2}' "$CM_DIR/$cm")
  htsim_scenario "$WORK/$w.toml" "$w" "$k" 'kind = "cm"' "cm = \"$CM_DIR/$cm\""
  best_h=""; best_m=""; ratios=""
  for i in $(seq "$RUNS"); do
    hpin=(); mpin=(); mpid=""; mrc_ran=0
    if [ "$PAIRED" = 1 ]; then  # together, on cores 0 / 1, swapped every run
      hpin=(taskset -c $((i % 2))); mpin=(taskset -c $(((i + 1) % 2)))
      run_mrc "$w" &
      mpid=$!
    elif [ "$ALTERNATE" = 1 ]; then  # one core, one after the other, mrc first on even runs
      hpin=(taskset -c $(($(nproc) - 1))); mpin=("${hpin[@]}")
      if [ $((i % 2)) = 0 ]; then run_mrc "$w"; mrc_ran=1; fi
    fi
    if [ -n "$HTSIM" ]; then
      (cd "$WORK" && timed "h_$w" "${hpin[@]}" "$HTSIM" -tm "$CM_DIR/$cm" -sender_cc_only -paths 128 -end "$end" \
        -o "$WORK/htsim.log") >"$WORK/h.t"
      rm -f "$WORK/htsim.log"
      read -r hw hc hr <"$WORK/h.t"
      h_done=$(grep -c "finished at" "$WORK/h_$w.out" || true)
      read -r hp hm <<<"$(htsim_fct "$WORK/h_$w.out")"
      echo "$w run $i htsim_uec: wall ${hw} s  cpu ${hc} s  peak RSS $((hr / 1024)) MB  finished ${h_done}/${flows}  FCT p50 ${hp} max ${hm} us"
      [ "$h_done" = "$flows" ] || status=1
      if [ -z "$best_h" ] || awk -v a="$hc" -v b="$(cut -d' ' -f2 <<<"$best_h")" 'BEGIN{exit !(a < b)}'; then
        best_h="$hw $hc $hr $hp $hm"
      fi
    fi
    if [ -n "$mpid" ]; then  # --paired: it ran alongside htsim
      wait "$mpid"
    elif [ "$mrc_ran" = 0 ]; then
      run_mrc "$w"
    fi
    read -r mw mc mr <"$WORK/m.t"
    if [ -n "$HTSIM" ]; then
      ratios="$ratios $(awk -v h="$hc" -v m="$mc" 'BEGIN{printf "%.3f", h / (m > 0 ? m : 0.001)}')"
    fi
    read -r m_done mp mm qi qs <<<"$(python3 -c '
import json, sys
try:
    v = json.load(open(sys.argv[1]))["variants"][0]
    q = v.get("qp_memory", {})
    print(v["finished"], "%.1f" % v["fct_us"]["p50"], "%.1f" % v["fct_us"]["max"],
          int(q.get("idle_bytes", 0)), int(q.get("sender_bytes", 0)))
except Exception:
    print("0 - - 0 0")' "$WORK/m_$w.out")"
    echo "$w run $i mrc sim:   wall ${mw} s  cpu ${mc} s  peak RSS $((mr / 1024)) MB  finished ${m_done}/${flows}  FCT p50 ${mp} max ${mm} us  QP bytes idle ${qi} sender ${qs}"
    [ "$m_done" = "$flows" ] || status=1
    # The best run: by CPU time, or with threads by wall time (their CPU time includes the spinning).
    mkey=$mc; mf=2
    if [ "$THREADS" != 1 ]; then mkey=$mw; mf=1; fi
    if [ -z "$best_m" ] || awk -v a="$mkey" -v b="$(cut -d' ' -f$mf <<<"$best_m")" 'BEGIN{exit !(a < b)}'; then
      best_m="$mw $mc $mr $mp $mm"
    fi
  done
  med=$(tr ' ' '\n' <<<"$ratios" | { grep . || true; } | sort -g | awk '{a[NR]=$1} END{if (NR == 0) print "-"; else print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2)}')
  geo=$(tr ' ' '\n' <<<"$ratios" | { grep . || true; } | awk '{s += log($1)} END{if (NR == 0) print "-"; else printf "%.3f", exp(s / NR)}')
  # How far the geometric mean can be from the machine's true ratio: a 95 % interval from the spread
  # of the logarithms (Student's t). On a shared machine one run's ratio moves by tens of percent.
  ci=$(tr ' ' '\n' <<<"$ratios" | { grep . || true; } | awk '{x[NR] = log($1); s += x[NR]} END{
    if (NR < 2) { print "-"; exit }
    split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228 2.201 2.179 2.160 2.145 2.131 2.120 2.110 2.101 2.093 2.086 2.080 2.074 2.069 2.064 2.060 2.056 2.052 2.048 2.045 2.042", t, " ")
    m = s / NR; for (i = 1; i <= NR; i++) v += (x[i] - m) ^ 2
    df = NR - 1; q = df <= 30 ? t[df] : (df <= 60 ? 2.042 : (df <= 120 ? 2.000 : 1.980))  # rounded up
    h = q * sqrt(v / df / NR); printf "%.2f-%.2f", exp(m - h), exp(m + h)}')
  if [ "$PAIRED" = 1 ]; then echo "$w paired htsim/mrc CPU ratios:$ratios (geometric mean $geo, 95 % interval $ci, median $med)"; fi
  if [ "$ALTERNATE" = 1 ]; then echo "$w alternated htsim/mrc CPU ratios:$ratios (geometric mean $geo, 95 % interval $ci, median $med)"; fi
  echo "$w $flows ${best_h:-- - - - -} $best_m $geo" >>"$ROWS"
done

echo
if [ "$PAIRED" = 1 ]; then
  echo "$RUNS paired run(s): times are the best of each; cpu_x = geometric mean of htsim / mrc CPU within a run; wall_x best / best; memory = mrc / htsim peak RSS"
elif [ "$ALTERNATE" = 1 ]; then
  echo "$RUNS alternated run(s), one core: times are the best of each; cpu_x = geometric mean of htsim / mrc CPU within a run; wall_x best / best; memory = mrc / htsim peak RSS"
else
  echo "best of $RUNS run(s); speed-up = htsim / mrc (CPU, wall), memory = mrc / htsim peak RSS; mrc on $THREADS thread(s)"
fi
awk -v paired="$WITHIN" 'BEGIN {
  printf "%-10s %7s | %8s %8s %7s %9s | %8s %8s %7s %9s | %7s %7s %6s\n", "workload", "flows",
         "h_wall_s", "h_cpu_s", "h_MB", "h_p50/max", "m_wall_s", "m_cpu_s", "m_MB", "m_p50/max",
         "cpu_x", "wall_x", "mem_x"
}
{
  w = $1; n = $2; hw = $3; hc = $4; hr = $5; hp = $6; hm = $7; mw = $8; mc = $9; mr = $10; mp = $11; mm = $12
  cx = paired == 1 ? $13 : hc / (mc > 0 ? mc : 0.01)
  if (hw == "-") {
    printf "%-10s %7s | %8s %8s %7s %9s | %8.3f %8.3f %7.0f %9s | %7s %7s %6s\n", w, n, "-", "-", "-", "-",
           mw, mc, mr / 1024, mp "/" mm, "-", "-", "-"
  } else {
    printf "%-10s %7s | %8.2f %8.3f %7.0f %9s | %8.2f %8.3f %7.0f %9s | %6.2fx %6.2fx %6.2f\n", w, n,
           hw, hc, hr / 1024, int(hp) "/" int(hm), mw, mc, mr / 1024, int(mp) "/" int(mm),
           cx, hw / (mw > 0 ? mw : 0.01), mr / hr
  }
}' "$ROWS"
exit $status
