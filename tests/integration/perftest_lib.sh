# Shared by the exec_perftest_* tests (sourced, not run): Debian's perftest through `mrc exec`.
#   pt_run NAME SRV_WRAP CLI_WRAP SRV_DEV CLI_DEV SRV_ADDR TOOL ARGS...
#       server and client of TOOL (ib_write_bw / ib_write_lat) with ARGS, each as
#       `WRAP mrc exec --devices DEV [--peers PEERS] -- TOOL -d mrc0 -p PORT ARGS [SRV_ADDR]`;
#       outputs in $WORK/NAME.srv / NAME.cli, the client's end time in NAME.end; fails unless both
#       exit 0 within PT_TIMEOUT s.
#       SRV_PEERS / CLI_PEERS (optional) become --peers.
#   pt_rows NAME bw|lat CHECK_ARGS...  checks the rows NAME's client and server printed
#       (perftest_rows.py; ib_write_bw's server prints a sweep's last row only); the client's as JSON in
#       NAME.json
# Needs MRC (the mrc binary), WORK, PY and fail.
for t in ib_write_bw ib_write_lat ss; do
  command -v "$t" >/dev/null || fail "needs $t (Debian perftest / iproute2: ./dev installs them)"
done
ROWS="$(dirname "${BASH_SOURCE[0]}")/perftest_rows.py"
PT_TIMEOUT=${PT_TIMEOUT:-120}
# perftest's TCP port: a free one, picked by the kernel.
pt_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("0.0.0.0", 0)); print(s.getsockname()[1])'; }

pt_run() {
  local name=$1 swrap=$2 cwrap=$3 sdev=$4 cdev=$5 saddr=$6 tool=$7 port i t0=$SECONDS
  shift 7
  port=$(pt_port)
  local speers=() cpeers=()
  [[ -n ${SRV_PEERS:-} ]] && speers=(--peers "$SRV_PEERS")
  [[ -n ${CLI_PEERS:-} ]] && cpeers=(--peers "$CLI_PEERS")
  # shellcheck disable=SC2086  # the wrappers are words ("", or "mrc-testbed exec h2 --")
  $swrap timeout "$PT_TIMEOUT" "$MRC" exec --devices "$sdev" "${speers[@]}" -- \
    "$tool" -d mrc0 -p "$port" "$@" >"$WORK/$name.srv" 2>&1 &
  local spid=$!
  # The client connects once: wait until the server listens.
  for ((i = 0; i < 600; i++)); do
    $swrap ss -ltnH "sport = :$port" 2>/dev/null | grep -q . && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.05
  done
  local crc=0 src=0
  $cwrap timeout "$PT_TIMEOUT" "$MRC" exec --devices "$cdev" "${cpeers[@]}" -- \
    "$tool" -d mrc0 -p "$port" "$@" "$saddr" >"$WORK/$name.cli" 2>&1 || crc=$?
  date +%s.%N >"$WORK/$name.end"
  wait "$spid" || src=$?
  echo "$name: $tool $* -> client exit $crc, server exit $src ($((SECONDS - t0)) s)"
  if ((crc != 0 || src != 0)); then
    echo "== client" >&2; tail -n 30 "$WORK/$name.cli" >&2
    echo "== server" >&2; tail -n 30 "$WORK/$name.srv" >&2
    fail "$name: $tool did not complete (client $crc, server $src; 124 = killed after $PT_TIMEOUT s)"
  fi
}

pt_rows() {
  local name=$1 kind=$2
  shift 2
  "$PY" "$ROWS" "$kind" "$WORK/$name.cli" --json "$WORK/$name.json" "$@" ||
    { tail -n 30 "$WORK/$name.cli" >&2; fail "$name: the rows ib_write_$kind printed are wrong"; }
  # After an -a sweep ib_write_bw's server prints the last size's row only.
  local sargs=("$@")
  [[ $kind == bw ]] && sargs=("${@/#--sweep/--sizes=8388608}")
  "$PY" "$ROWS" "$kind" "$WORK/$name.srv" "${sargs[@]}" >/dev/null ||
    { tail -n 30 "$WORK/$name.srv" >&2; fail "$name: the server's rows are wrong"; }
}
