# Shared by the exec_perftest_* tests (sourced, not run): Debian's perftest through `mrc exec`.
#   pt_run NAME SRV_WRAP CLI_WRAP SRV_DEV CLI_DEV SRV_ADDR TOOL ARGS...
#       server and client of TOOL (ib_write_bw / ib_write_lat) with ARGS, each as
#       `WRAP mrc exec --devices DEV [--peers PEERS] -- TOOL -d mrc0 -p PORT ARGS [SRV_ADDR]`;
#       outputs in $WORK/NAME.srv / NAME.cli, the client's end time in NAME.end; fails unless both
#       exit 0 within PT_TIMEOUT s.
#       SRV_PEERS / CLI_PEERS (optional) become --peers.
#       perftest times its rows with the TSC, calibrated against gettimeofday by a 200-point linear
#       fit; on a busy 2-core machine the fit can fall below r^2 = 0.9 and perftest exits 1 with
#       "Can't produce a report" whatever the transport did. That one failure, and only it, is
#       retried (PT_TRIES attempts, 3 by default); PT_ARM / PT_DISARM (optional) name commands run
#       before each attempt and after one that is retried (a fault to inject and to heal).
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
  local name=$1 try
  for ((try = 1; ; try++)); do
    [[ -n ${PT_ARM:-} ]] && $PT_ARM
    pt_once "$@" && return 0
    # Anything but perftest's own clock calibration failing is the transport's: fail at once.
    grep -qs 'Correlation coefficient r^2' "$WORK/$name.cli" "$WORK/$name.srv" ||
      fail "$name: ${7} did not complete (client $PT_CRC, server $PT_SRC; 124 = killed after $PT_TIMEOUT s)"
    ((try < ${PT_TRIES:-3})) || fail "$name: perftest's clock calibration failed $try times (machine too busy)"
    echo "$name: perftest's clock calibration failed (r^2 < 0.9, a busy machine); retrying ($try of ${PT_TRIES:-3})"
    [[ -n ${PT_DISARM:-} ]] && $PT_DISARM
  done
}

# pt_once: pt_run's one attempt; returns non-zero (PT_CRC / PT_SRC set) when either side failed.
pt_once() {
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
  PT_CRC=0 PT_SRC=0
  $cwrap timeout "$PT_TIMEOUT" "$MRC" exec --devices "$cdev" "${cpeers[@]}" -- \
    "$tool" -d mrc0 -p "$port" "$@" "$saddr" >"$WORK/$name.cli" 2>&1 || PT_CRC=$?
  date +%s.%N >"$WORK/$name.end"
  wait "$spid" || PT_SRC=$?
  echo "$name: $tool $* -> client exit $PT_CRC, server exit $PT_SRC ($((SECONDS - t0)) s)"
  if ((PT_CRC != 0 || PT_SRC != 0)); then
    echo "== client" >&2; tail -n 30 "$WORK/$name.cli" >&2
    echo "== server" >&2; tail -n 30 "$WORK/$name.srv" >&2
    return 1
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
