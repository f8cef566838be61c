#!/usr/bin/env bash
# `mrc ctl` reaches a live `mrc perf` (loopback, no root; docs/decisions.md D46): while a client
# runs, the server process serves its controller API on <runtime dir>/<pid>.perf.sock. `mrc ctl
# list` shows both processes; against the server's pid `apply` programs an explicit EV profile,
# `evs` shows its EVs in wire form, `deny` / `allow` change an EV's state (seen by `show`), and an
# `events` follower receives the GOOD event the allow causes. A file with one bad profile changes
# nothing on the live endpoint (`apply` is all or nothing).
# Usage: perf_ctl_loopback.sh PATH/TO/mrc   (CMake passes $<TARGET_FILE:mrc>)
SERVER_TIMEOUT=120
source "$(dirname "$0")/perf_loopback.sh"
export MRC_CTL_DIR=$WORK/ctl  # this test's own runtime directory: no other test's endpoints
# 127.<plane>.89.x: addresses no other test uses
start_server srv --local 127.1.89.1,127.2.89.1 --once
timeout 60 "$MRC" perf --client 127.0.0.1 -p "$PORT" --local 127.1.89.2,127.2.89.2 -D 15 -s 4096 \
  >"$WORK/cli.out" 2>"$WORK/cli.err" &
CLI_PID=$!
PIDS+=("$CLI_PID")
ctl() { "$MRC" ctl --pid "$MRC_PID" "$@"; }
# The server's socket appears when its session's endpoint opens.
for ((i = 0; i < 200; i++)); do
  [[ -S $MRC_CTL_DIR/$MRC_PID.perf.sock ]] && break
  alive "waiting for the control socket"
  sleep 0.05
done
[[ -S $MRC_CTL_DIR/$MRC_PID.perf.sock ]] || fail "no control socket $MRC_CTL_DIR/$MRC_PID.perf.sock"
[[ $(stat -c %a "$MRC_CTL_DIR/$MRC_PID.perf.sock") == 600 ]] || fail "the socket is not mode 0600"
[[ $(stat -c %a "$MRC_CTL_DIR") == 700 ]] || fail "the runtime directory is not mode 0700"

"$MRC" ctl list >"$WORK/list.out" 2>&1 || fail "ctl list"
cat "$WORK/list.out"
grep -Eq "^$MRC_PID +mrc +perf +2 +$MRC_CTL_DIR/$MRC_PID.perf.sock$" "$WORK/list.out" || fail "list: no server line"
(( $(grep -c ' perf ' "$WORK/list.out") == 2 )) || fail "list: want the server and the client"

cat >"$WORK/p.toml" <<'TOML'
[[ev_format]]
id = 13
mode = "stev"
widths = [16, 16]

[[ev_profile]]
id = 7
mode = "explicit"
format = 13
fields = [ { width = 16, mask = 0xFFFF, max = 0xFFFF }, { width = 16, mask = 0xFFFF, max = 0xFFFF } ]
evs = [ { ev = "c0010001", port = 1 }, { ev = "c0020002", port = 2 }, { ev = "c0030003", port = 1 }, { ev = "c0040004", port = 2 } ]
min_active = 1
event_mask = ["good", "assumed_bad"]
TOML
ctl apply "$WORK/p.toml" >"$WORK/apply.out" 2>&1 || fail "ctl apply"
ctl evs 7 >"$WORK/evs.out" 2>&1 || fail "ctl evs"
cat "$WORK/evs.out"
grep -Eqi "c0020002.*(49154|0xc002)" "$WORK/evs.out" || fail "evs: EV c0020002 not shown with its source port"
ctl events --count 1 >"$WORK/events.out" 2>&1 &
EV_PID=$!
PIDS+=("$EV_PID")
sleep 1  # the follower creates its event CQ first (only the allow below makes an event)
ctl deny 7 c0020002 2 >"$WORK/deny.out" 2>&1 || fail "ctl deny"
has deny "EV profile 7: EV c0020002 on port 2 DENIED"
ctl evs 7 >"$WORK/evs2.out" 2>&1 || fail "ctl evs after deny"
grep -Eqi "port 2 raw c0020002 .* DENIED$" "$WORK/evs2.out" || fail "evs: c0020002 is not DENIED"
# The live endpoint: its ports count the session's traffic (retried until the data flows).
cat >"$WORK/show.py" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
p7 = [p for p in doc["ev_profiles"] if p["id"] == 7][0]
print("profile 7:", p7["state"], p7["states_per_port"], "ports:", [(p["port"], p["tx_packets"]) for p in doc["ports"]])
ok = p7["state"] == "ONLINE" and p7["states_per_port"]["2"] == {"DENIED": 1, "GOOD": 1}
ok = ok and len(doc["ports"]) == 2 and all(p["tx_packets"] > 0 for p in doc["ports"])
sys.exit(0 if ok else 1)
PYEOF
for ((i = 0; ; i++)); do
  ctl show --json >"$WORK/show.out" 2>&1 || fail "ctl show"
  "$PY" "$WORK/show.py" "$WORK/show.out" && break
  ((i < 100)) || fail "show: not the live endpoint with EV c0020002 DENIED"
  alive "ctl show"
  sleep 0.1
done
ctl allow 7 c0020002 2 >"$WORK/allow.out" 2>&1 || fail "ctl allow"
for ((i = 0; i < 100; i++)); do kill -0 "$EV_PID" 2>/dev/null || break; sleep 0.05; done
wait "$EV_PID" || fail "ctl events did not end with its one event"
cat "$WORK/events.out"
grep -Eqi "c0020002.*GOOD|GOOD.*c0020002" "$WORK/events.out" || fail "events: no GOOD event for c0020002"

# All or nothing: format 14 and profile 8 are fine and get applied first, then profile 9 names a
# port the endpoint does not have: the file must leave nothing behind.
cat >"$WORK/bad.toml" <<'TOML'
[[ev_format]]
id = 14
mode = "stev"
widths = [16, 16]

[[ev_profile]]
id = 8
mode = "explicit"
format = 14
fields = [ { width = 16, mask = 0xFFFF, max = 0xFFFF }, { width = 16, mask = 0xFFFF, max = 0xFFFF } ]
evs = [ { ev = "c0050005", port = 1 } ]
min_active = 1
event_mask = ["good"]

[[ev_profile]]
id = 9
mode = "explicit"
format = 14
fields = [ { width = 16, mask = 0xFFFF, max = 0xFFFF }, { width = 16, mask = 0xFFFF, max = 0xFFFF } ]
evs = [ { ev = "c0060006", port = 1 }, { ev = "c0070007", port = 5 } ]
min_active = 1
event_mask = ["good"]
TOML
if ctl apply "$WORK/bad.toml" >"$WORK/bad.out" 2>&1; then fail "a file with a bad profile was applied"; fi
cat "$WORK/bad.out"
has bad "bad.toml:[0-9]+: EV profile 9: evs: port 5 is not 1..2 \(nothing was changed\)"
ctl show --json >"$WORK/show2.out" 2>&1 || fail "ctl show after the refused file"
"$PY" - "$WORK/show2.out" <<'PYEOF' || fail "the refused file left profiles 8 or 9 behind"
import json, sys
doc = json.load(open(sys.argv[1]))
ids = sorted(p["id"] for p in doc["ev_profiles"])
fmts = sorted(f["id"] for f in doc["ev_formats"])
print("after the refused file: EV profiles", ids, "formats", fmts)
sys.exit(0 if 7 in ids and 8 not in ids and 9 not in ids and 14 not in fmts else 1)
PYEOF
alive "the ctl commands"
wait "$CLI_PID" || fail "the client failed while the controller worked on the server"
echo "PASS"
