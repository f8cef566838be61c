# Shared by the loopback `mrc perf` scripts (sourced, not run): takes MRC from $1 and sets up WORK,
# PY, PIDS (killed on exit), fail (prints every output file), wait_for, and
#   start_server NAME ARGS...  a server on a free port: SRV_PID (of timeout(1)), MRC_PID (of mrc), PORT
#   alive WHAT                 fails unless the server still runs
#   client NAME ARGS...        a client run to its end (60 s at most); RC = its exit code
#   has NAME REGEX             NAME's stdout or stderr matches
# SERVER_LOCAL / CLIENT_LOCAL (optional) are added as --local to every server / client, and
# SERVER_TIMEOUT (default 150 s) bounds a server's life.
set -euo pipefail
MRC=${1:-}
[[ -n $MRC && -x $MRC ]] || { echo "FAIL: usage: $0 PATH/TO/mrc (got '$MRC')"; exit 1; }
PY=$( [[ -x /usr/bin/python3 ]] && echo /usr/bin/python3 || echo python3 )
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }  # TERM: timeout(1) passes it on
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$WORK"/*.out "$WORK"/*.err; do [[ -s $f ]] && { echo "== $f" >&2; head -c 3000 "$f" >&2; }; done
  exit 1
}
source "$(dirname "${BASH_SOURCE[0]}")/wait.sh"

start_server() {
  local name=$1; shift
  local local_args=()
  [[ -n ${SERVER_LOCAL:-} ]] && local_args=(--local "$SERVER_LOCAL")
  : >"$WORK/$name.out"
  timeout "${SERVER_TIMEOUT:-150}" "$MRC" perf --server --bind 127.0.0.1 -p 0 "${local_args[@]}" "$@" \
    >"$WORK/$name.out" 2>&1 &
  SRV_PID=$!
  PIDS+=("$SRV_PID")
  wait_for "$WORK/$name.out" 'waiting on' "$SRV_PID"
  PORT=$(sed -n 's/.*waiting on 127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/$name.out")
  MRC_PID=$(tr -d ' ' <"/proc/$SRV_PID/task/$SRV_PID/children" 2>/dev/null || true)
  [[ -n $MRC_PID ]] || MRC_PID=$(ps -o pid= --ppid "$SRV_PID" | tr -d ' ')  # without CONFIG_PROC_CHILDREN
  [[ -n $PORT && -n $MRC_PID ]] || fail "perf server printed no port"
}
alive() { kill -0 "$SRV_PID" 2>/dev/null || fail "the server ended after: $1"; }
client() {
  local name=$1; shift
  local local_args=()
  [[ -n ${CLIENT_LOCAL:-} ]] && local_args=(--local "$CLIENT_LOCAL")
  RC=0
  timeout 60 "$MRC" perf --client 127.0.0.1 -p "$PORT" "${local_args[@]}" --lat-iters 20 "$@" >"$WORK/$name.out" \
    2>"$WORK/$name.err" || RC=$?
}
has() { grep -Eqs -- "$2" "$WORK/$1".out "$WORK/$1".err || fail "$1: no /$2/"; }
