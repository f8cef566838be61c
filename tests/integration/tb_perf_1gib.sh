#!/usr/bin/env bash
# `mrc perf` moves 1 GiB (1024 x 1 MiB RDMA WRITEs, 1 QP) from h1 to h2 across the 2-host x 4-plane x
# 2-spine ecmp fabric with a 1500-byte MTU. Every byte must arrive intact (the server compares all of
# them with the pattern), no datagram may be fragmented (the payload is chosen from the interface
# MTU), and the routers' packet counters must show every plane and every spine in use, none above
# 1.5x its share. Usage: tb_perf_1gib.sh PATH/TO/mrc (CMake passes $<TARGET_FILE:mrc>)
PREFIX=mrcpg
MRC=${1:-${MRC_BIN:-}}
source "$(dirname "$0")/tb_perf_lib.sh"
perf_fabric_up
perf_start_server
snap before
# 64 EVs per plane, not perf's default 32: the routers hash each EV's 5-tuple with a key the kernel
# draws at boot, so the spine split is a fixed draw per machine boot. With 32 EVs a 1.5x bound fails
# on ~1 % of boots even for a uniform hash (binomial tail, 4 planes), and one boot here split plane 4
# 78:22 with 32 EVs, 66:34 with 64; the 1.5x bound is meant to catch spraying that does not spread.
perf_start_client -s 1MiB -n 1024 --evs 64
perf_wait
snap after
perf_check --spread --min-bytes $((1 << 30))
echo PASS
