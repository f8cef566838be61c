#!/usr/bin/env bash
# The training runs of `./dev pgo`: an instrumented `mrc` (MRC_PGO=generate) runs them and records
# where its time goes. On purpose none of them is a workload of bench/sim_speed.sh (htsim's
# permutation and incast matrices, the all-to-alls of 64, 128 and 256 hosts): the benchmark then
# measures the optimisation on inputs it was not trained on. About 12 s of one core (instrumented).
#   tools/pgo_train.sh MRC WORKDIR
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MRC=$1
mkdir -p "$2"
WORK=$(cd "$2" && pwd)  # absolute: a scenario's matrix path is relative to the scenario's file

source "$ROOT/tools/cm/htsim_net.sh"

# A 63 -> 1 incast of 2 MB per sender onto host 77, from every other even-numbered host.
python3 - "$WORK/incast63.cm" <<'EOF'
import sys
dst = 77
src = [h for h in range(0, 128, 2) if h != dst][:63]
with open(sys.argv[1], "w") as f:
    f.write(f"Nodes 128\nConnections {len(src)}\n")
    for s in src:
        f.write(f"{s}->{dst} start 0 size 2000000\n")
EOF
python3 "$ROOT/tools/cm/gen_all_to_all.py" "$WORK/a2a48.cm" 48 196608 --network 128 >/dev/null

# htsim's network with other matrices than the benchmark's.
htsim_scenario "$WORK/pgo_perm.toml" pgo_perm 8 'kind = "permutation"' 'bytes = 1048576' 'seed = 3'
htsim_scenario "$WORK/pgo_incast.toml" pgo_incast 8 'kind = "cm"' "cm = \"$WORK/incast63.cm\""
htsim_scenario "$WORK/pgo_a2a.toml" pgo_a2a 8 'kind = "cm"' "cm = \"$WORK/a2a48.cm\""

run() {  # label, mrc sim arguments...
  local label=$1; shift
  echo "  pgo training: $label"
  local rc=0
  "$MRC" sim --no-progress --json "$@" >"$WORK/$label.json" || rc=$?
  # 3: a flow did not finish, which some scenarios show on purpose (scen5's RoCE variant).
  [ "$rc" = 0 ] || [ "$rc" = 3 ] || { echo "pgo_train.sh: $label failed (exit $rc)" >&2; exit 1; }
}
run perm "$WORK/pgo_perm.toml"
run perm-2-threads "$WORK/pgo_perm.toml" --threads 2
run incast "$WORK/pgo_incast.toml"
run a2a "$WORK/pgo_a2a.toml"
# The rest of the simulator: Clos topologies with 8 planes, RoCE and PFC, faults, a collective.
for s in scen4_incast_victim scen5_failover scen6_collective_small; do
  run "$s" "$ROOT/scenarios/$s.toml"
done
