#!/usr/bin/env bash
# `mrc perf --auth` between two processes on loopback (no root needed): with --auth on both sides a
# 16 MiB transfer completes with every byte verified and no packet failing its MAC; a server started
# with --auth refuses a client that does not authenticate, with a clear message on both sides.
# Usage: perf_auth_loopback.sh PATH/TO/mrc   (CMake passes $<TARGET_FILE:mrc>)
set -euo pipefail
MRC=${1:-}
[[ -n $MRC && -x $MRC ]] || { echo "FAIL: usage: $0 PATH/TO/mrc (got '$MRC')"; exit 1; }
PY=$( [[ -x /usr/bin/python3 ]] && echo /usr/bin/python3 || echo python3 )
WORK=$(mktemp -d)
SRV_PID=
trap '[[ -n $SRV_PID ]] && kill "$SRV_PID" 2>/dev/null; rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$(dirname "$0")/wait.sh"
SRV_PLANES=127.61.1.1,127.61.2.1 CLI_PLANES=127.61.1.2,127.61.2.2

# start_server ARGS...: sets OOB_PORT (the server listens on a free port and prints it)
start_server() {
  : >"$WORK/srv.out"  # now, not in the child: the wait below must not read the last server's output
  timeout 60 "$MRC" perf --server --once --bind 127.0.0.1 -p 0 --local "$SRV_PLANES" "$@" >"$WORK/srv.out" 2>&1 &
  SRV_PID=$!
  wait_for "$WORK/srv.out" 'waiting on' "$SRV_PID"
  OOB_PORT=$(sed -n 's/.*waiting on 127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/srv.out")
  [[ -n $OOB_PORT ]] || { cat "$WORK/srv.out"; fail "perf server printed no port"; }
}

start_server --auth
rc=0
timeout 60 "$MRC" perf --client 127.0.0.1 -p "$OOB_PORT" --local "$CLI_PLANES" --auth -s 256KiB -n 64 \
  --lat-iters 20 --json --metrics >"$WORK/cli.json" 2>"$WORK/cli.err" || rc=$?
src=0; wait "$SRV_PID" || src=$?; SRV_PID=
echo "authenticated run: client exit $rc, server exit $src; server: $(tail -n1 "$WORK/srv.out")"
[[ $rc -eq 0 && $src -eq 0 ]] || { cat "$WORK/cli.err" "$WORK/srv.out" >&2; fail "authenticated run failed"; }
"$PY" - "$WORK/cli.json" <<'PYEOF' || fail "authenticated run: report"
import json, sys
r = json.load(open(sys.argv[1])); res = r["results"][0]; ep = r["metrics"]["endpoint"]
print(f"verified={r['verified']} {res['bytes'] * res['iterations'] / 2**20:.0f} MiB, {res['packets']} packets, "
      f"rx_auth_failed={ep['rx_auth_failed']} rx_bad_packet={ep['rx_bad_packet']}")
sys.exit(0 if r["verified"] is True and res["iterations"] == 64 and ep["rx_auth_failed"] == 0
         and ep["rx_bad_packet"] == 0 else 1)
PYEOF

start_server --auth
rc=0
timeout 60 "$MRC" perf --client 127.0.0.1 -p "$OOB_PORT" --local "$CLI_PLANES" -s 256KiB -n 4 \
  >"$WORK/cli.out" 2>&1 || rc=$?
src=0; wait "$SRV_PID" || src=$?; SRV_PID=
echo "unauthenticated client vs --auth server: client exit $rc ($(cat "$WORK/cli.out")), server exit $src ($(tail -n1 "$WORK/srv.out"))"
[[ $rc -eq 1 ]] && grep -q 'requires authenticated packets' "$WORK/cli.out" || fail "client should refuse clearly"
[[ $src -eq 1 ]] && grep -q 'does not authenticate' "$WORK/srv.out" || fail "server should refuse clearly"
echo PASS
