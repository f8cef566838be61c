#!/usr/bin/env bash
# `mrc perf` moves 1 GiB (64 KiB WRITEs) from h1 to h2 across the 4-plane x 2-spine fabric; a third of
# the way in, h1 loses its plane-2 link (the whole plane is gone for it). The transfer must complete on
# the other three planes, every byte verified, and the goodput must get back to 75 % of its value
# before the fault: the three planes left are 75 % of the capacity (on this CPU-bound veth fabric they
# carry 90-100 % of what four did, which makes a 90 % threshold a coin toss). The time it takes is
# printed, from 10 ms intervals.
PREFIX=mrcpp
MRC=${1:-${MRC_BIN:-}}
source "$(dirname "$0")/tb_perf_lib.sh"
perf_fabric_up
perf_start_server
snap before
perf_start_client -s 64KiB -n 16384 --interval 10
wait_rx_bytes $((350 << 20))
link_down h1 pl2
perf_wait
snap after
perf_check --min-bytes $((1 << 30)) --fault-at "$WORK/fault.t" --recover 0.75 --quiet-after p2l1:h1:rx_packets \
  --quiet-after p2l2:h2:tx_packets
echo PASS
