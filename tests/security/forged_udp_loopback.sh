#!/usr/bin/env bash
# An attacker on loopback during a verified `mrc perf` transfer (docs/security.md): mrc_forge sends,
# from the peers' own addresses, a wrong-rkey write sweep to the server (QPNs 0x10-0x11, every 1024th
# PSN: the responder NAKs the real client), access-error NAK and UNEXP_EVENT sweeps straight to the
# client, port-status updates with mask 0 and with only the arrival plane to both, and, reading the
# client's PSNs off lo (root), access-error NAKs for PSNs in flight. The
# transfer must still complete with every byte verified and both processes exit 0; the counters
# must show the attack arrived and was refused or dismissed.
#   forged_udp_loopback.sh PATH/TO/mrc PATH/TO/mrc_forge [--auth]
set -euo pipefail
MRC=$1 FORGE=$2 AUTH=${3:-}
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$WORK"/*.out "$WORK"/*.err "$WORK"/*.json; do
    [[ -s $f ]] && { echo "== $f" >&2; grep -v '^ ' "$f" | head -c 3000 >&2; echo >&2; }  # JSON metrics are indented
  done
  # The counters of whatever both sides reported (the refusals, held and dismissed NAKs).
  [[ -s $WORK/cli.json ]] && "$PY" "$(dirname "$0")/check_attack.py" "$WORK/cli.json" "$WORK/srv.json" "$AUTH" >&2 2>/dev/null
  exit 1
}
source "$(dirname "$0")/../integration/wait.sh"
PY=$( [[ -x /usr/bin/python3 ]] && echo /usr/bin/python3 || echo python3 )
# 127.<plane>.97.x (plain) and 127.<plane>.98.x (--auth): addresses no other test uses.
NET=97; [[ $AUTH == --auth ]] && NET=98
S1=127.1.$NET.1 S2=127.2.$NET.1 C1=127.1.$NET.2 C2=127.2.$NET.2

timeout 120 "$MRC" perf --server --once --bind 127.0.0.1 -p 0 --local $S1,$S2 $AUTH --metrics --json --impair delay=4ms \
  >"$WORK/srv.json" 2>"$WORK/srv.err" &
SRV=$!
PIDS+=("$SRV")
wait_for "$WORK/srv.err" 'waiting on' "$SRV"
PORT=$(grep -o 'waiting on 127.0.0.1:[0-9]*' "$WORK/srv.err" | grep -o '[0-9]*$')
[[ -n $PORT ]] || fail "the server printed no port"
# A long verified run (15 s of 64 KiB writes) so the attack lands while data is in flight: the
# attack takes 2-3 s alone, but over 8 s on the ASan build while other tests load both cores.
timeout 100 "$MRC" perf --client 127.0.0.1 -p "$PORT" --local $C1,$C2 $AUTH -s 64KiB -D 15 --window 64MiB \
  --lat-iters 20 --json --metrics >"$WORK/cli.json" 2>"$WORK/cli.err" &
CLI=$!
PIDS+=("$CLI")
wait_for "$WORK/srv.err" 'serving the client' "$SRV"
sleep 0.3

attack() {  # name, then mrc_forge arguments
  local name=$1; shift
  "$FORGE" "$@" >>"$WORK/forge.out" 2>&1 || fail "mrc_forge $name failed"
}
for m in 0 1 2; do  # mask 0, and masks that leave out the other plane
  attack ps-srv --mode port-status --mask $m --to $S1,$S2 --from $C1 --repeat 8
  attack ps-cli --mode port-status --mask $m --to $C1,$C2 --from $S1 --repeat 8
done
# Toward the server, as if from the client (plane by plane: the source must be that plane's).
attack write1 --mode write --to $S1 --from $C1 --qpn 16-17
attack write2 --mode write --to $S2 --from $C2 --qpn 16-17
# Toward the client, as if from the server: its one QP is 0x10. A blind sweep hits only PSNs in
# flight, about rate x RTT of them: on bare loopback a handful, so the server delays what it
# receives by 4 ms (its --impair) to keep hundreds in flight, and the sweep takes every 256th PSN
# paced at 60,000 packets/s (a faster flood mostly overflows a slow ASan client's socket buffer).
attack nak1 --mode nak --to $C1 --from $S1 --qpn 16-16 --psn-step 256 --pps 60000
attack unexp2 --mode unexp --to $C2 --from $S2 --qpn 16-16 --psn-step 256 --pps 60000
# A blind sweep hits the window only by chance (usually a few times; the testbed's version once got
# none). An attacker who reads the client's packets on lo names PSNs in flight: 4 forged NAKs that
# reach the QP every run, so the check that they were held or dismissed cannot pass vacuously.
attack nak-on-path --mode nak --watch lo --to $C1 --from $S1 --qpn 16-16 --repeat 4
if ! kill -0 "$CLI" 2>/dev/null; then
  rc=0; wait "$CLI" || rc=$?
  [[ $rc -eq 0 ]] || fail "the client failed during the attack (exit $rc)"
  fail "the transfer ended before the attack did (lengthen -D): nothing was tested"
fi

rc=0; wait "$CLI" || rc=$?
[[ $rc -eq 0 ]] || fail "client exit $rc"
src=0; wait "$SRV" || src=$?
[[ $src -eq 0 ]] || fail "server exit $src"
cat "$WORK/forge.out"
"$PY" "$(dirname "$0")/check_attack.py" "$WORK/cli.json" "$WORK/srv.json" "$AUTH" || fail "checks failed"
echo PASS
