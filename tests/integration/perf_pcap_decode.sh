#!/usr/bin/env bash
# `mrc perf --pcap` captures on loopback (no root) re-read by two readers that are not the engine:
# `mrc decode` (every packet decodes, every ICRC is RoCEv2's, data, SACK and probe opcodes present) and
# tshark with tools/wireshark/mrc.lua (no malformed frame, every ICRC RoCEv2's, the same packet count).
# Runs: the default UDP port 4791, and 4971 on both sides (the dissector's second port and
# `mrc decode`'s default --port list), both with the project's wire extensions (both sides offer them);
# port 5000, which only `mrc decode --port 5000` and the dissector's "UDP port" preference read (neither
# without: the check can fail); and a client with --wire-ext off (D45): both sides then send spec bytes,
# no SACK carries a service time or a CC flag (with them some do).
# A third reader, scapy (scapy.contrib.roce), recomputes every frame's RoCEv2 ICRC (W22).
# Usage: perf_pcap_decode.sh PATH/TO/mrc MRC_LUA [TSHARK [PYTHON_WITH_SCAPY]]
set -euo pipefail
MRC=${1:-}
LUA=${2:-}
TSHARK=${3:-tshark}
PY=${4:-python3}
[[ -n $MRC && -x $MRC && -f $LUA ]] || { echo "FAIL: usage: $0 PATH/TO/mrc MRC_LUA [TSHARK [PYTHON]]"; exit 1; }
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$WORK"/*.out "$WORK"/*.err; do [[ -s $f ]] && { echo "== $f" >&2; head -c 3000 "$f" >&2; }; done
  exit 1
}
source "$(dirname "$0")/wait.sh"
export HOME="$WORK"  # tshark's profile

run() {  # run NAME UDP_PORT SERVER_ADDRS CLIENT_ADDRS WIRE_EXT(on|off, the client's)
  local name=$1 port=$2 srv=$3 cli=$4 ext=$5
  local dec=(--ext) ts=()
  if [[ $port != 4791 && $port != 4971 ]]; then
    dec+=(--port "$port")
    ts=(-o "mrc.udp_port:$port")
  fi
  : >"$WORK/$name-srv.out"
  timeout 60 "$MRC" perf --server --bind 127.0.0.1 -p 0 --once --local "$srv" --udp-port "$port" \
    --pcap "$WORK/$name-srv.pcap" >"$WORK/$name-srv.out" 2>&1 &
  local spid=$!
  PIDS+=("$spid")
  wait_for "$WORK/$name-srv.out" 'waiting on' "$spid"
  local tcp
  tcp=$(sed -n 's/.*waiting on 127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/$name-srv.out")
  timeout 60 "$MRC" perf --client 127.0.0.1 -p "$tcp" --local "$cli" --udp-port "$port" -s 64KiB -n 20 \
    --lat-iters 20 --wire-ext "$ext" --pcap "$WORK/$name-cli.pcap" >"$WORK/$name-cli.out" 2>&1 || fail "$name: client failed"
  wait "$spid" || fail "$name: server failed"
  grep -q "wire ext $ext" "$WORK/$name-cli.out" || fail "$name: the client did not report wire ext $ext"
  grep -q "wire ext $ext" "$WORK/$name-srv.out" || fail "$name: the server did not report wire ext $ext"
  local side
  for side in srv cli; do
    local pcap="$WORK/$name-$side.pcap"
    "$MRC" decode "${dec[@]}" "$pcap" >"$WORK/$name-$side.json" 2>"$WORK/$name-$side-decode.err" ||
      fail "$name/$side: mrc decode exited $?"
    local n bad ops
    n=$(wc -l <"$WORK/$name-$side.json")
    (( n > 100 )) || fail "$name/$side: only $n packets decoded"
    # W22: every ICRC is RoCEv2's, over the masked IP/UDP headers (the capture writes the IPv4 ID the
    # kernel sends, 0), and so not the one without them (W16); a trimmed packet has none.
    good=$(grep -c '"rocev2":true' "$WORK/$name-$side.json" || true)
    bad=$(grep -c '"mrc":true' "$WORK/$name-$side.json" || true)
    [[ $good -eq $n && $bad -eq 0 ]] || fail "$name/$side: $good of $n packets with RoCEv2's ICRC, $bad with W16's""
    grep -q "\"dst_port\":$port" "$WORK/$name-$side.json" || fail "$name/$side: no packet to port $port"
    for op in WRITE_FIRST WRITE_MIDDLE WRITE_LAST SACK; do
      grep -q "\"opcode_name\":\"$op\"" "$WORK/$name-$side.json" || fail "$name/$side: no $op packet"
    done
    local withext
    withext=$(grep -c '"svc_time":[1-9]\|"cc_flags":[1-9]' "$WORK/$name-$side.json" || true)
    if [[ $ext == on ]]; then
      (( withext > 0 )) || fail "$name/$side: wire ext on, yet no packet with a service time or CC flag"
    else
      [[ $withext -eq 0 ]] || fail "$name/$side: wire ext off, yet $withext packets with our fields"
    fi
    if [[ ${#ts[@]} -gt 0 ]]; then
      [[ $("$MRC" decode --ext "$pcap" | wc -l) -eq 0 ]] || fail "$name/$side: port $port read without --port"
      [[ $("$TSHARK" -n -r "$pcap" -X "lua_script:$LUA" -Y mrc 2>/dev/null | wc -l) -eq 0 ]] ||
        fail "$name/$side: the dissector read port $port without its preference"
    fi
    local frames malformed badicrc
    frames=$("$TSHARK" -n -r "$pcap" -X "lua_script:$LUA" "${ts[@]}" -Y mrc 2>/dev/null | wc -l)
    [[ $frames -eq $n ]] || fail "$name/$side: tshark saw $frames MRC frames, mrc decode $n"
    malformed=$("$TSHARK" -n -r "$pcap" -X "lua_script:$LUA" "${ts[@]}" -Y '_ws.malformed || _ws.lua || _ws.expert.severity == error' 2>/dev/null | wc -l)
    [[ $malformed -eq 0 ]] || fail "$name/$side: $malformed frames malformed or with an error for the dissector"
    badicrc=$("$TSHARK" -n -r "$pcap" -X "lua_script:$LUA" "${ts[@]}" -Y 'mrc && !(mrc.icrc.good && mrc.icrc.rocev2)' 2>/dev/null | wc -l)
    [[ $badicrc -eq 0 ]] || fail "$name/$side: $badicrc frames without a good RoCEv2 ICRC for the dissector""
    "$PY" "$(dirname "$0")/scapy_icrc.py" --port "$port" --min "$n" "$pcap" >"$WORK/$name-$side-scapy.out" 2>&1 ||
      fail "$name/$side: scapy: $(cat "$WORK/$name-$side-scapy.out")"
    echo "$name/$side: $n packets, every one decoded by mrc decode and mrc.lua, RoCEv2 ICRC good for scapy too"
  done
}

# 127.<plane>.96.x: addresses no other test uses
run default 4791 127.5.96.1,127.6.96.1 127.5.96.2,127.6.96.2 on
run port4971 4971 127.5.97.1,127.6.97.1 127.5.97.2,127.6.97.2 on
run port5000 5000 127.5.98.1,127.6.98.1 127.5.98.2,127.6.98.2 on
run specbytes 4791 127.5.99.1,127.6.99.1 127.5.99.2,127.6.99.2 off
echo "perf_pcap_decode: OK"
