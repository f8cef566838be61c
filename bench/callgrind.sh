#!/usr/bin/env bash
# Deterministic instruction counts for the engine data path, with callgrind (bench/README.md).
#
#   bench/callgrind.sh [BUILD_DIR]
#
# BUILD_DIR defaults to <repo>/build-bench; it is configured (Release) if it has no CMakeCache.txt,
# and mrc_bench_driver is (re)built. Each figure is measured twice, with N1 and N2 packets, counting
# only instructions executed inside the driver's measure_<mode> function (--toggle-collect); the
# difference divided by N2-N1 removes warm-up and one-time costs. Set CALLGRIND_KEEP=DIR to keep the
# callgrind.out files there (for callgrind_annotate).
set -euo pipefail
shopt -s inherit_errexit  # a failed measurement inside $(...) stops the script

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${1:-$root/build-bench}
N1=2048
N2=4096  # both multiples of the driver's batch (128 packets); 2048 packets = 8 whole 1 MiB messages

command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind not found" >&2; exit 1; }
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMRC_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" --target mrc_bench_driver -j1 >/dev/null
driver=$build/bench/mrc_bench_driver

if [[ -n ${CALLGRIND_KEEP:-} ]]; then
  out=$CALLGRIND_KEEP
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

# count MODE N [icrc] -> instructions executed inside measure_MODE
count() {
  local f="$out/callgrind.out.$1.$2${3:+.$3}"
  if ! valgrind --tool=callgrind --callgrind-out-file="$f" --collect-atstart=no \
    --toggle-collect="*measure_$1*" "$driver" "$@" >"$f.log" 2>&1; then
    echo "callgrind.sh: '$driver $*' failed:" >&2
    cat "$f.log" >&2
    exit 1
  fi
  awk '/^totals:/ { print $2 }' "$f"
}

# per_unit MODE [icrc] -> instructions per packet (per call for `deadline`)
per_unit() {
  local a b
  a=$(count "$1" $N1 ${2:+"$2"})
  b=$(count "$1" $N2 ${2:+"$2"})
  awk -v a="$a" -v b="$b" -v n=$((N2 - N1)) 'BEGIN { printf "%.1f", (b - a) / n }'
}

send=$(per_unit send)
recv=$(per_unit recv)
send_icrc=$(per_unit send icrc)
recv_icrc=$(per_unit recv icrc)
deadline=$(per_unit deadline)
memcpy=$(per_unit memcpy)
icrc=$(per_unit icrc)

echo "send path: $send instructions/packet"
echo "receive+SACK path: $recv instructions/packet"
echo "send path, ICRC on: $send_icrc instructions/packet"
echo "receive+SACK path, ICRC on: $recv_icrc instructions/packet"
echo "baseline memcpy 4096 B: $memcpy instructions"
echo "baseline wire::icrc 4096 B: $icrc instructions"
echo "Endpoint::next_deadline (batch in flight): $deadline instructions/call"
awk -v s="$send" -v r="$recv" -v m="$memcpy" \
  'BEGIN { printf "ratio to memcpy 4096 B: send %.2f, receive+SACK %.2f\n", s / m, r / m }'
