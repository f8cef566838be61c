#!/usr/bin/env bash
# Regenerates docs/results.md and docs/results/*.png from the simulator scenarios.
#
#   tools/results/make_results.sh [--mrc PATH] [--full-scale]
#
#   --mrc         the mrc binary (default: build/tools/mrc/mrc; build it first: ./dev demo)
#   --full-scale  also run scenarios/scen6_scale.toml and scen6_collective.toml (131,072 hosts: GBs of
#                 memory, minutes each); without it the report repeats the last saved full-scale results
#
# Scenario N of the report is every scenarios/scenN_*.toml (N = 1..6); a missing scenario, or one
# whose input is missing, is reported loudly and skipped. The .cm matrices of scenario 1 are
# written first by tools/cm/gen_permutation.py (python3 standard library). Needs python3 with
# matplotlib (Debian: python3-matplotlib, in ./dev's package list).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MRC=$ROOT/build/tools/mrc/mrc
ARGS=()
while [ $# -gt 0 ]; do
  case $1 in
    --mrc) MRC=$2; shift 2 ;;
    --full-scale) ARGS+=(--full-scale); shift ;;
    *) echo "make_results.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$MRC" ] || { echo "make_results.sh: no mrc binary at $MRC (build it or pass --mrc)" >&2; exit 2; }
# The first python3 that has matplotlib (a pyenv python3 on PATH may not see Debian's package).
PY=""
for p in python3 /usr/bin/python3; do
  if "$p" -c "import matplotlib" 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "make_results.sh: no python3 with matplotlib (apt-get install python3-matplotlib)" >&2; exit 2; }
"$PY" "$ROOT/tools/cm/gen_permutation.py" --check >/dev/null
exec "$PY" "$ROOT/tools/results/make_results.py" --mrc "$MRC" --root "$ROOT" "${ARGS[@]}"
