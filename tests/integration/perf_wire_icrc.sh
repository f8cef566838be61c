#!/usr/bin/env bash
# What Linux really sends for the UDP endpoint, not the synthetic `mrc perf --pcap` frames: dumpcap on
# the loopback of a private network namespace while an mrc perf server and client run there, then scapy
# (scapy.contrib.roce) recomputes the RoCEv2 ICRC of every captured frame from its real IPv4 and UDP
# headers (docs/wire-format.md W22: the sender folds them in with IPv4 ID 0, which the kernel writes for
# an unconnected DF socket). Needs root (CI runs as root).
# Usage: perf_wire_icrc.sh PATH/TO/mrc PYTHON_WITH_SCAPY
set -euo pipefail
MRC=${1:-}
PY=${2:-python3}
fail() { echo "FAIL: $*" >&2; exit 1; }
[[ -n $MRC && -x $MRC ]] || fail "usage: $0 PATH/TO/mrc PYTHON_WITH_SCAPY"
[[ $(id -u) -eq 0 ]] || fail "needs root (a network namespace and a capture on its loopback)"
if [[ -z ${MRC_WIRE_ICRC_NETNS:-} ]]; then
  MRC_WIRE_ICRC_NETNS=1 exec unshare -n bash "$0" "$@"
fi
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
source "$(dirname "$0")/wait.sh"
ip link set lo up

dumpcap -i lo -f 'udp dst port 4791' -w "$WORK/wire.pcap" -P >"$WORK/dumpcap.out" 2>&1 &
dpid=$!
PIDS+=("$dpid")
wait_for "$WORK/dumpcap.out" 'File:' "$dpid"
timeout 60 "$MRC" perf --server --bind 127.0.0.1 -p 0 --once --local 127.0.1.1,127.0.2.1 >"$WORK/srv.out" 2>&1 &
spid=$!
PIDS+=("$spid")
wait_for "$WORK/srv.out" 'waiting on' "$spid"
tcp=$(sed -n 's/.*waiting on 127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/srv.out")
timeout 60 "$MRC" perf --client 127.0.0.1 -p "$tcp" --local 127.0.1.2,127.0.2.2 -s 64KiB -n 20 --lat-iters 20 \
  >"$WORK/cli.out" 2>&1 || fail "client failed: $(cat "$WORK/cli.out")"
wait "$spid" || fail "server failed: $(cat "$WORK/srv.out")"
sleep 0.5  # the last frames reach the capture file
kill -INT "$dpid"
wait "$dpid" || true
"$PY" "$(dirname "$0")/scapy_icrc.py" --port 4791 --min 200 "$WORK/wire.pcap" || fail "scapy disagrees"
echo "perf_wire_icrc: OK"
