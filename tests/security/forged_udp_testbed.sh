#!/usr/bin/env bash
# The loopback attack (forged_udp_loopback.sh) from a third host of the netns fabric: h1 (client)
# writes to h2 (server) over 2 planes while h3 runs mrc_forge with raw sockets that put h1's or h2's
# plane addresses in the IP source (off-path spoofing; the routers do no source filtering), and an
# on-path mrc_forge in h1's leaf forges NAKs for the PSNs it sees. Every byte must verify and both
# sides must exit 0; check_attack.py judges the counters.
#   forged_udp_testbed.sh PATH/TO/mrc PATH/TO/mrc_forge [--auth]
PREFIX=mrcsec
MRC=$1 FORGE=$2 AUTH=${3:-}
[[ $AUTH == --auth ]] && PREFIX=mrcsea
source "$(dirname "$0")/../integration/lib.sh"
SRV_PID= CLI_PID=
trap 'rc=$?; for p in $CLI_PID $SRV_PID; do kill "$p" 2>/dev/null || true; done; set +e; (exit $rc); cleanup' EXIT
"$TB" up --hosts 3 --planes 2 --spines 1 --mode ecmp
"$TB" show --json >"$WORK/show.json"
read -r H1 H2 LEAF1 < <("$PY" - "$WORK/show.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
planes = {x["node"]: sorted(x["planes"], key=lambda p: p["plane"]) for x in s["host_list"]}
h = {n: [p["ipv4"] for p in ps] for n, ps in planes.items()}
print(",".join(h["h1"]), ",".join(h["h2"]), planes["h1"][0]["leaf_node"])
PY
)
IFS=, read -r C1 C2 <<<"$H1"
IFS=, read -r S1 S2 <<<"$H2"
"$TB" exec h2 -- timeout 120 "$MRC" perf --server --once --bind "$S1" -p 18640 --local "$H2" $AUTH --metrics \
  --json --impair delay=4ms >"$WORK/srv.json" 2>"$WORK/srv.err" &
SRV_PID=$!
wait_for "$WORK/srv.err" 'waiting on' "$SRV_PID"
"$TB" exec h1 -- timeout 100 "$MRC" perf --client "$S1" -p 18640 --local "$H1" --remote "$H2" $AUTH -s 64KiB \
  -D 8 --window 64MiB --lat-iters 20 --json --metrics >"$WORK/cli.json" 2>"$WORK/cli.err" &
CLI_PID=$!
wait_for "$WORK/srv.err" 'serving the client' "$SRV_PID"
sleep 0.3
forge() { "$TB" exec h3 -- "$FORGE" --spoof "$@" >>"$WORK/forge.out" 2>&1 || fail "mrc_forge $* failed: $(tail -3 "$WORK/forge.out")"; }
for m in 0 1 2; do
  forge --mode port-status --mask $m --to "$S1,$S2" --from "$C1" --repeat 8
  forge --mode port-status --mask $m --to "$C1,$C2" --from "$S1" --repeat 8
done
forge --mode write --to "$S1" --from "$C1" --qpn 16-17
forge --mode write --to "$S2" --from "$C2" --qpn 16-17
forge --mode nak --to "$C1" --from "$S1" --qpn 16-16 --psn-step 256 --pps 60000
forge --mode unexp --to "$C2" --from "$S2" --qpn 16-16 --psn-step 256 --pps 60000
# A blind sweep hits a PSN in flight only where the client's window is at that moment, and the
# forged writes' NAKs (the server's own) only where the server's is: usually a few hits, once (a
# clean clone's run, 2026-12-06) none. An attacker on the path (h1's plane-1 leaf, a packet socket on
# its interfaces) reads PSNs off the client's packets and names 4 in flight: hits every run.
"$TB" exec "$LEAF1" -- "$FORGE" --spoof --mode nak --watch any --to "$C1" --from "$S1" --qpn 16-16 \
  --repeat 4 >>"$WORK/forge.out" 2>&1 || fail "mrc_forge on path failed: $(tail -3 "$WORK/forge.out")"
if ! kill -0 "$CLI_PID" 2>/dev/null; then
  rc=0; wait "$CLI_PID" || rc=$?
  CLI_PID=
  cat "$WORK/cli.err" >&2
  [[ -s $WORK/cli.json ]] && "$PY" "$(dirname "$0")/check_attack.py" "$WORK/cli.json" "$WORK/srv.json" "$AUTH" >&2 2>/dev/null
  [[ $rc -eq 0 ]] || fail "the client failed during the attack (exit $rc)"
  fail "the transfer ended before the attack did (lengthen -D): nothing was tested"
fi
rc=0; wait "$CLI_PID" || rc=$?
CLI_PID=
src=0; wait "$SRV_PID" || src=$?
SRV_PID=
if [[ $rc -ne 0 || $src -ne 0 ]]; then
  cat "$WORK/cli.err" "$WORK/srv.err" >&2
  fail "client exit $rc, server exit $src"
fi
cat "$WORK/forge.out"
"$PY" "$(dirname "$0")/check_attack.py" "$WORK/cli.json" "$WORK/srv.json" "$AUTH" || fail "checks failed"
echo PASS
