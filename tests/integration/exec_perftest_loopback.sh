#!/usr/bin/env bash
# Unmodified perftest over software MRC on loopback (issue 17): ib_write_bw and ib_write_lat, server
# and client each under `mrc exec` with its own single-plane device (127.0.77.1 / .2, a free UDP
# port), at one size and as -a sweeps (2 B - 8 MiB); every row they print is checked (size,
# iteration count, non-zero bandwidth / latency). ibv_devices / ibv_devinfo list the software
# device; verbs the device does not have (RDMA READ, SEND, UD) fail cleanly rather than hang.
set -euo pipefail
MRC=${1:-}
[[ -n $MRC && -x $MRC ]] || { echo "FAIL: usage: $0 PATH/TO/mrc (got '$MRC')"; exit 1; }
PY=$( [[ -x /usr/bin/python3 ]] && echo /usr/bin/python3 || echo python3 )
WORK=$(mktemp -d)
trap '[[ -n ${KEEP:-} ]] || rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$(dirname "$0")/perftest_lib.sh"
UDP=$("$PY" -c 'import socket; s = socket.socket(type=socket.SOCK_DGRAM); s.bind(("127.0.77.1", 0)); print(s.getsockname()[1])')
SDEV="mrc0=127.0.77.2@$UDP" CDEV="mrc0=127.0.77.1@$UDP"

# The device is listed, with its GID (the plane address, RoCE v2).
"$MRC" exec --devices "$CDEV;mrc1=127.0.77.3,127.0.77.4@$UDP" -- ibv_devices >"$WORK/devices.out"
grep -Eq '^\s+mrc0\s+[0-9a-f]{16}$' "$WORK/devices.out" && grep -Eq '^\s+mrc1\s' "$WORK/devices.out" ||
  { cat "$WORK/devices.out"; fail "ibv_devices does not list mrc0 and mrc1"; }
"$MRC" exec --devices "$CDEV" -- ibv_devinfo -v >"$WORK/devinfo.out"
grep -q 'hca_id:.mrc0' "$WORK/devinfo.out" && grep -q 'state:.*PORT_ACTIVE' "$WORK/devinfo.out" &&
  grep -q 'GID\[  0\]:.*::ffff:127.0.77.1, RoCE v2' "$WORK/devinfo.out" ||
  { cat "$WORK/devinfo.out"; fail "ibv_devinfo does not show mrc0's port and GID"; }
echo "ibv_devices / ibv_devinfo: mrc0 listed, port active, GID ::ffff:127.0.77.1 RoCE v2"

pt_run bw1 "" "" "$SDEV" "$CDEV" 127.0.77.2 ib_write_bw -s 65536 -n 1000 --report_gbits
pt_rows bw1 bw --sizes 65536 --iters 1000
pt_run bwa "" "" "$SDEV" "$CDEV" 127.0.77.2 ib_write_bw -a -n 5 --report_gbits
pt_rows bwa bw --sweep --iters 5
pt_run lat1 "" "" "$SDEV" "$CDEV" 127.0.77.2 ib_write_lat -s 64 -n 200
pt_rows lat1 lat --sizes 64 --iters 200
pt_run lata "" "" "$SDEV" "$CDEV" 127.0.77.2 ib_write_lat -a -n 5
pt_rows lata lat --sweep --iters 5

# Verbs an MRC QP does not have end the program with its own error, promptly: RDMA READ (the
# device registers no remote-read MR), SEND (post_send refuses the opcode), UD (no such QP type).
refused() {
  local name=$1 want=$2 rc=0 port
  shift 2
  port=$(pt_port)
  timeout 30 "$MRC" exec --devices "$SDEV" -- "$@" -d mrc0 -p "$port" >"$WORK/$name.srv" 2>&1 &
  local spid=$!
  for ((i = 0; i < 600; i++)); do
    ss -ltnH "sport = :$port" | grep -q . && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.05
  done
  timeout 30 "$MRC" exec --devices "$CDEV" -- "$@" -d mrc0 -p "$port" 127.0.77.2 >"$WORK/$name.cli" 2>&1 || rc=$?
  kill "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  ((rc != 0 && rc != 124)) || { cat "$WORK/$name.cli"; fail "$*: exit $rc (wanted a refusal, not success or a hang)"; }
  grep -q "$want" "$WORK/$name.cli" || { cat "$WORK/$name.cli"; fail "$*: no '$want' in its output"; }
  echo "$*: refused as expected (exit $rc): $(grep -m1 "$want" "$WORK/$name.cli")"
}
refused read "Couldn.t allocate MR" ib_read_bw -s 4096 -n 10
refused send "Couldn.t post send" ib_send_bw -s 4096 -n 10
refused ud "Failed to create QP" ib_send_bw -c UD -s 1024 -n 10
echo PASS
