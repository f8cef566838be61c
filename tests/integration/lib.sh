# Shared helpers for the mrc-testbed integration tests (sourced, not run).
# Every test: needs root + netns (else it fails with the reason), uses its own prefix, and tears the
# testbed down on any exit through a trap.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TB="$ROOT/tools/testbed/mrc-testbed"
GEN="$ROOT/tools/testbed/udpgen.py"
CHK="$HERE/tbcheck.py"
PY=${MRC_PYTHON:-$( [[ -x /usr/bin/python3 ]] && echo /usr/bin/python3 || echo python3 )}
export MRC_PYTHON=$PY
: "${PREFIX:?set PREFIX before sourcing lib.sh}"
export MRC_TESTBED_PREFIX=$PREFIX

source "$HERE/wait.sh"
need() { echo "FAIL: this test $* (run the tests as root on Linux)"; exit 1; }
fail() { echo "FAIL: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || need "needs root"
for t in ip nft ethtool tc "$PY"; do command -v "$t" >/dev/null || need "needs $t"; done
ip netns add "$PREFIX-probe" 2>/dev/null || need "cannot create network namespaces"
ip netns del "$PREFIX-probe"

# need_srv6: the srv6 tests need the kernel's seg6local routes (End with next-csid), which a kernel
# built without CONFIG_IPV6_SEG6_LWTUNNEL lacks ("lwt encapsulation type not supported"). That is
# the machine, not the code under test: say so and exit 77, which CTest reports as skipped.
need_srv6() {
  local ns="$PREFIX-s6probe" err
  ip netns add "$ns" || need "cannot create network namespaces"
  if ! err=$(ip -n "$ns" -6 route add fcbb:bb00:1000::/48 encap seg6local action End flavors next-csid \
               lblen 32 nflen 16 dev lo 2>&1); then
    ip netns del "$ns"
    echo "SKIP: this kernel ($(uname -r)) cannot install SRv6 seg6local routes: $err"
    echo "SKIP: (it needs CONFIG_IPV6_SEG6_LWTUNNEL; the srv6 fabric cannot be built on this machine)"
    exit 77
  fi
  ip netns del "$ns"
}

WORK=$(mktemp -d)
RECV_PID=
cleanup() {
  local rc=$?
  [[ -n $RECV_PID ]] && kill "$RECV_PID" 2>/dev/null || true
  "$TB" down >/dev/null 2>&1 || true
  rm -rf "$WORK"
  exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

snap() { "$TB" counters --json >"$WORK/$1.json"; }

# start_recv NAME HOST EXPECT [TIMEOUT [IDLE]]: background receiver on HOST port 4791, returns once
# it is bound. It stops at EXPECT datagrams, IDLE s after the last one, or TIMEOUT s.
start_recv() {
  local name=$1 host=$2 expect=$3 timeout=${4:-30} idle=${5:-10}
  rm -f "$WORK/$name.ready"
  "$TB" exec "$host" -- "$PY" "$GEN" recv --expect "$expect" --timeout "$timeout" --idle "$idle" \
    --ready "$WORK/$name.ready" --out "$WORK/$name.out" &
  RECV_PID=$!
  wait_for "$WORK/$name.ready" ready "$RECV_PID"
}
wait_recv() {
  wait "$RECV_PID" || fail "receiver exited with an error"
  RECV_PID=
  [[ -s $WORK/$1.out ]] || fail "receiver $1 wrote no result"
}
