#!/usr/bin/env bash
# `mrc perf --server` behaves like a server (loopback, no root): it explains a refusal to the client,
# drops stray TCP connections (garbage, silence, an immediate close) and goes on, survives a client
# killed mid-run, turns a second client away while busy, serves clients one after another, and on
# SIGINT prints the summary (exit 0 only if no session failed); --once serves one client and exits
# with its result. Also checked against the program's own report: -D stops at the deadline
# (elapsed_s), --interval bins lie on a fixed grid, the packet column counts data packets only, the
# latency summary, and --udp-port.
# Usage: perf_server_loopback.sh PATH/TO/mrc   (CMake passes $<TARGET_FILE:mrc>)
SERVER_TIMEOUT=120
source "$(dirname "$0")/perf_loopback.sh"
# 127.<plane>.95.x: addresses no other test uses
SRV=127.1.95.1,127.2.95.1 CLI=127.1.95.2,127.2.95.2
# wait_more FILE PATTERN N: until FILE holds more than N lines matching PATTERN (20 s at most)
wait_more() {
  local i
  for ((i = 0; i < 400; i++)); do
    (( $(grep -c -- "$2" "$1" || true) > $3 )) && return 0
    alive "waiting for '$2'"
    sleep 0.05
  done
  fail "'$2' did not appear again in $1"
}

start_server srv --local "$SRV" --hello-timeout 1

# 1. A mismatch is explained to the client, not only on the server.
client mismatch --local 127.1.95.3 -n 4
echo "plane-count mismatch: client exit $RC: $(tail -n1 "$WORK/mismatch.err")"
[[ $RC -eq 1 ]] || fail "mismatch: client exit $RC, want 1"
has mismatch "the server ended the session: the client uses 1 plane\(s\), this server has 2"
alive "a plane-count mismatch"

# 2. Parameters out of range (a hand-made hello with --evs 0): the reply names the parameter, its
#    value and its range.
"$PY" - "$PORT" >"$WORK/badhello.out" <<'PYEOF' || fail "bad hello: no reason came back"
import socket, struct, sys
vals = [0x4D52435045524632, 1, 4096, 4096, 0, 0, 2, 15, 0, 2, 1, 4791]  # evs_per_plane = 0
body = struct.pack(">I", len(vals)) + b"".join(struct.pack(">Q", v) for v in vals)
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"MRCO" + struct.pack(">HHI", 4, 2, len(body)) + body)
data = b""
while chunk := s.recv(4096):
    data += chunk
magic, ver, typ, n = struct.unpack(">4sHHI", data[:12])
print(f"reply type {typ}: {data[12:12 + n].decode()}")
sys.exit(0 if magic == b"MRCO" and typ == 3 else 1)
PYEOF
echo "out-of-range hello: $(cat "$WORK/badhello.out")"
has badhello "client parameter evs_per_plane \(--evs\) = 0 is out of range \[1, 256\]"
alive "a hello with a parameter out of range"

# 3. Stray connections: garbage, silence (the hello timeout is 1 s here), an immediate close.
"$PY" - "$PORT" <<'PYEOF' || fail "stray connections"
import socket, sys, time
port = int(sys.argv[1])
g = socket.create_connection(("127.0.0.1", port)); g.sendall(b"GET / HTTP/1.0\r\n\r\n" * 4)
time.sleep(0.3); g.close()
idle = socket.create_connection(("127.0.0.1", port))
idle.settimeout(10)
reply = idle.recv(4096)          # the server gives up on it by itself
print("idle connection got:", reply[12:].decode(errors="replace"))
socket.create_connection(("127.0.0.1", port)).close()
PYEOF
wait_for "$WORK/srv.out" 'dropped the connection .*peer closed' "$SRV_PID" 10
has srv "dropped the connection from 127.0.0.1:[0-9]+: oob: bad magic"
has srv "dropped the connection from 127.0.0.1:[0-9]+: no hello within 1 s \(--hello-timeout\)"
alive "stray connections"

# 4. A client killed mid-run: the session ends with a message, the server waits for the next one.
"$MRC" perf --client 127.0.0.1 -p "$PORT" --local "$CLI" -s 64KiB -D 30 >"$WORK/killed.out" 2>&1 &  # no timeout(1): the kill must hit mrc
KPID=$!
PIDS+=("$KPID")
wait_for "$WORK/srv.out" 'serving the client' "$SRV_PID"
sleep 0.3
kill -9 "$KPID"
wait_for "$WORK/srv.out" 'failed: the client went away' "$SRV_PID" 20
alive "a client killed mid-run"

# 5. Busy: a second client during a session is told so at once.
timeout 60 "$MRC" perf --client 127.0.0.1 -p "$PORT" --local "$CLI" -s 64KiB -D 3 --lat-iters 20 \
  >"$WORK/first.out" 2>&1 &
FPID=$!
PIDS+=("$FPID")
wait_more "$WORK/srv.out" 'serving the client' 1
client busy --local 127.1.95.4,127.2.95.4 -n 4
echo "second client while busy: exit $RC: $(tail -n1 "$WORK/busy.err")"
[[ $RC -eq 1 ]] || fail "busy: client exit $RC, want 1"
has busy "the server ended the session: server busy with another client"
wait "$FPID" || fail "the first client failed while a second was turned away: $(cat "$WORK/first.out")"
has first "data verified"

# 6. Clients one after another, with the report checks: -D stops at the deadline; the bins are on a
#    100 ms grid even with verification pauses (1 MiB windows); DataPkt counts data packets only
#    (2-byte messages: one data packet each, plus the retransmissions); the latency summary.
client timed --local "$CLI" -s 64KiB -D 1.5 --window 1MiB --interval 100 --json
[[ $RC -eq 0 ]] || fail "timed run: client exit $RC"
client small --local "$CLI" -s 2 -D 1 --json
[[ $RC -eq 0 ]] || fail "2-byte run: client exit $RC"
client text --local "$CLI" -s 4KiB -n 100
[[ $RC -eq 0 ]] || fail "text run: client exit $RC"
"$PY" - "$WORK" <<'PYEOF' || fail "report checks"
import json, os, re, sys
W = sys.argv[1]
def report(name):  # the JSON report on stdout
    return json.load(open(os.path.join(W, name + ".out")))
bad = []
t = report("timed"); r = t["results"][0]
el, iv = r["elapsed_s"], r["intervals"]
print(f"-D 1.5: elapsed {el:.3f} s (active {r['seconds']:.3f} s, verification pauses {t['verify_pause_s']:.3f} s "
      f"in {t['verification_windows']} windows); {len(iv)} bins, lengths {sorted(set(round(x['ms'], 3) for x in iv))} ms")
if not 1.5 <= el <= 1.5 + 0.5: bad.append(f"-D 1.5 ran {el:.3f} s by its own report")
for k, x in enumerate(iv[:-1]):
    if abs(x["ms"] - 100) > 1e-6 or abs(x["t_s"] - 0.1 * (k + 1)) > 1e-6:
        bad.append(f"bin {k}: t_s {x['t_s']:.6f} ms {x['ms']:.6f}, not on the 100 ms grid"); break
if iv and not 0 < iv[-1]["ms"] <= 100 + 1e-6: bad.append(f"last bin {iv[-1]['ms']} ms")
if abs(sum(x["ms"] for x in iv) / 1e3 - el) > 1e-6: bad.append("bins do not cover the elapsed time")
if sum(x["bytes"] for x in iv) != r["bytes"] * r["iterations"]: bad.append("bins do not add up to the bytes moved")
s = report("small")["results"][0]
print(f"2-byte messages: {s['iterations']} messages, {s['packets']} data packets ({s['retransmissions']} rtx), "
      f"{s['datagrams']} datagrams, {s['packets_per_s']:.0f} data packets/s")
if s["packets"] != s["iterations"] + s["retransmissions"]: bad.append("data packets != messages + retransmissions")
lat = t["latency"]
print("latency:", {k: round(v, 1) if isinstance(v, float) else v for k, v in lat.items()})
if not (lat["iterations"] == 20 and 0 < lat["min_us"] <= lat["p50_us"] <= lat["p99_us"] <= lat["max_us"]
        and lat["min_us"] <= lat["avg_us"] <= lat["max_us"] and lat["stdev_us"] >= 0):
    bad.append("latency summary inconsistent")
text = open(os.path.join(W, "text.out")).read()
if not re.search(r"DataPkt/s", text): bad.append("no DataPkt/s column")
if not re.search(r"min [0-9.]+ us +avg [0-9.]+ us +p50 [0-9.]+ us +p99 [0-9.]+ us +max [0-9.]+ us +stdev", text):
    bad.append("no min/avg/p50/p99/max/stdev latency line")
print("\n".join("  " + b for b in bad) or "report checks ok")
sys.exit(1 if bad else 0)
PYEOF
alive "clients in a row"
n_done=$(grep -c 'mrc perf server: done' "$WORK/srv.out")
(( n_done == 4 )) || fail "the server completed $n_done sessions, want 4 (first, timed, small, text)"

# 7. SIGINT: the summary so far; exit 1, since sessions failed (the mismatch, the bad hello, the
#    killed client).
kill -INT "$SRV_PID"
src=0; wait "$SRV_PID" || src=$?
echo "SIGINT: server exit $src: $(tail -n1 "$WORK/srv.out")"
[[ $src -eq 1 ]] || fail "server exit $src after SIGINT with failed sessions, want 1"
has srv "stopped by SIGINT: 7 session\(s\), 4 completed, 3 failed; 3 stray connection\(s\) dropped"

# 8. --once keeps the one-client behaviour; --udp-port, different on each side, with 4791 taken on
#    both sides' plane addresses (so the default port could not have been used).
"$PY" -c '
import socket, sys, time
socks = []
for a in ("127.3.95.1", "127.4.95.1", "127.3.95.2", "127.4.95.2"):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((a, 4791)); socks.append(s)
open(sys.argv[1], "w").write("ready\n"); time.sleep(60)' "$WORK/blocker.ready" &
PIDS+=("$!")
wait_for "$WORK/blocker.ready" ready "$!"
start_server once --local 127.3.95.1,127.4.95.1 --once --udp-port 47912
client portrun --local 127.3.95.2,127.4.95.2 --udp-port 47911 -s 64KiB -n 50
src=0; wait "$SRV_PID" || src=$?
echo "--once with --udp-port 47912 / 47911: client exit $RC, server exit $src"
[[ $RC -eq 0 && $src -eq 0 ]] || fail "--once / --udp-port run: client $RC, server $src"
has portrun "data verified"
has once "waiting on 127.0.0.1:[0-9]+ \(UDP port 47912\), one client"

# 9. SIGINT with nothing failed: exit 0.
start_server clean --local 127.3.95.1,127.4.95.1 --udp-port 47913
client cleanrun --local 127.3.95.2,127.4.95.2 --udp-port 47914 -s 64KiB -n 50
[[ $RC -eq 0 ]] || fail "clean run: client exit $RC"
kill -TERM "$SRV_PID"
src=0; wait "$SRV_PID" || src=$?
echo "SIGTERM after one good session: server exit $src: $(tail -n1 "$WORK/clean.out")"
[[ $src -eq 0 ]] || fail "server exit $src, want 0"
has clean "stopped by SIGTERM: 1 session\(s\), 1 completed, 0 failed"
echo PASS
