#!/usr/bin/env bash
# The setup port of `mrc perf --server` is no denial of service (loopback, no root): every pending
# connection's hello is read at once, each against its own total deadline, so
#   1. 70 silent connections (more than the 64 read at once) do not hold a real client: it is served
#      at once, the oldest 7 are dropped to make room for newer ones and it, and the 63 others are told
#      the server is busy when its session starts (none timed out);
#   2. a 112-byte hello asking for 256 QPs x 16 MiB = 4 GiB is refused with the limit named (1 GiB by
#      default, --max-memory), and the server's peak RSS stays far below that;
#   3. a header sent a byte a second times out at --hello-timeout (a deadline for the whole hello);
#   4. garbage and a header announcing a 4 GiB body end only their own connection (a silent one next
#      to them stays open, a real client is served after them); nothing large is allocated for them;
#   5. --max-memory refuses a real client beyond it and says so on the client.
# Judged by the programs' own reports (client exit and lines, the server's log and summary); the
# timeouts only guard against a hang.
# Usage: perf_oob_attack.sh PATH/TO/mrc   (CMake passes $<TARGET_FILE:mrc>)
source "$(dirname "$0")/perf_loopback.sh"
# 127.<plane>.96.x: addresses no other test uses
SRV=127.1.96.1,127.2.96.1 CLI=127.1.96.2,127.2.96.2
SERVER_LOCAL=$SRV CLIENT_LOCAL=$CLI
# vm KEY: the server's VmRSS / VmHWM in KiB
vm() { sed -n "s/^$1:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$MRC_PID/status"; }
# stop NAME SUMMARY-REGEX: SIGINT, then the summary must match
stop() {
  kill -INT "$MRC_PID"
  wait "$SRV_PID" || true
  echo "$1: $(tail -n1 "$WORK/$1.out")"
  has "$1" "$2"
}

# Raw connections: python3 $WORK/oob.py MODE PORT ARGS...
cat >"$WORK/oob.py" <<'PYEOF'
import os, socket, struct, sys, time
mode, port = sys.argv[1], int(sys.argv[2])
HELLO = 0x4D52435045524632
def conn():
    return socket.create_connection(("127.0.0.1", port), timeout=20)
def frame(typ, body):
    return b"MRCO" + struct.pack(">HHI", 4, typ, len(body)) + body
def values(vals):
    return frame(2, struct.pack(">I", len(vals)) + b"".join(struct.pack(">Q", v) for v in vals))
def reason(s):  # the server's kError text, or what came instead
    data = b""
    try:
        while chunk := s.recv(4096):
            data += chunk
    except OSError as e:
        return f"<{e}>"
    if len(data) < 12 or data[:4] != b"MRCO":
        return f"<no error message: {data[:40]!r}>"
    typ, n = struct.unpack(">HI", data[6:12])
    return data[12:12 + n].decode(errors="replace") if typ == 3 else f"<message type {typ}>"
def still_open(s):  # connected, nothing received
    s.setblocking(False)
    try:
        return s.recv(1, socket.MSG_PEEK) is None
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        s.setblocking(True)
def wait_file(path, limit=90):
    for _ in range(limit * 20):
        if os.path.exists(path): return
        time.sleep(0.05)
    sys.exit(f"{path} never appeared")

if mode == "silent":  # N connections that say nothing, held until RELEASE exists; then a report
    n, ready, release = int(sys.argv[3]), sys.argv[4], sys.argv[5]
    socks = [conn() for _ in range(n)]
    open(ready, "w").write("ready\n")
    wait_file(release)
    told = {}
    for s in socks:
        r = reason(s) if not still_open(s) else "<still open>"
        r = r.split(" (")[0]  # without the address of the client served
        told[r] = told.get(r, 0) + 1
    for r, k in sorted(told.items(), key=lambda x: -x[1]): print(f"{k} of {n} silent connections: {r}")
    for s in socks: s.close()
elif mode == "bighello":  # 256 QPs x 16 MiB = 4 GiB, 2 planes; otherwise a valid hello
    s = conn()
    msg = values([HELLO, 256, 16 << 20, 4096, 0, 8, 2, 15, 0, 2, 1, 4791])
    s.sendall(msg)
    print(f"{len(msg)}-byte hello: {reason(s)}")
elif mode == "slow":  # a valid header, a byte a second; STARTED written after the first byte
    started = sys.argv[3]
    s = conn()
    hdr = values([HELLO] + [1] * 11)[:12]
    sent = 0
    for b in hdr:
        try:
            s.sendall(bytes([b]))
        except OSError:
            break
        sent += 1
        if sent == 1: open(started, "w").write("started\n")
        s.settimeout(1.0)
        try:
            data = s.recv(4096, socket.MSG_PEEK)
            if data: break
        except socket.timeout:
            pass
        s.settimeout(20)
    print(f"slow header ({sent} bytes sent, one a second): {reason(s)}")
elif mode == "garbage":  # a silent one, garbage, a header announcing 4 GiB; silent held until RELEASE
    ready, release = sys.argv[3], sys.argv[4]
    quiet = conn()
    g = conn(); g.sendall(b"GET / HTTP/1.0\r\n\r\n" * 8)
    h = conn(); h.sendall(b"MRCO" + struct.pack(">HHI", 4, 2, 0xFFFFFFFF) + b"\0" * 4096)
    print(f"garbage: {reason(g)}")
    print(f"4 GiB header: {reason(h)}")
    print(f"silent neighbour still open after them: {still_open(quiet)}")
    open(ready, "w").write("ready\n")
    wait_file(release)
    print(f"silent neighbour, once a client came: {reason(quiet)}")
    quiet.close()
PYEOF

# 1. 70 silent connections, then a real client (a hello timeout longer than the whole case).
start_server a --hello-timeout 60
"$PY" "$WORK/oob.py" silent "$PORT" 70 "$WORK/silent.ready" "$WORK/silent.release" >"$WORK/silent.out" 2>&1 &
SILENT=$!
PIDS+=("$SILENT")
wait_for "$WORK/silent.ready" ready "$SILENT" 60
client crowd -s 64KiB -n 50
: >"$WORK/silent.release"
wait "$SILENT" || fail "silent connections: $(cat "$WORK/silent.out")"
echo "client after 70 silent connections: exit $RC: $(grep -h 'data verified' "$WORK/crowd.out" || true)"
echo "$(cat "$WORK/silent.out")"
[[ $RC -eq 0 ]] || fail "crowd: client exit $RC, want 0 (served while the silent connections waited)"
has crowd "data verified"
has silent "^63 of 70 silent connections: server busy with another client$"
has silent "^7 of 70 silent connections: server busy: 64 connections were waiting for their hello and this one the longest"
has a "serving the client at 127.0.0.1:[0-9]+"
has a "dropped the connection from 127.0.0.1:[0-9]+: 64 connections were waiting for their hello"
grep -q 'no hello within' "$WORK/a.out" && fail "a silent connection timed out: the client was not served at once"
alive "70 silent connections"

# 2. A 112-byte hello asking for 4 GiB: refused with the limit named; the server stays small.
hwm0=$(vm VmHWM)
"$PY" "$WORK/oob.py" bighello "$PORT" >"$WORK/bighello.out" 2>&1 || fail "4 GiB hello: $(cat "$WORK/bighello.out")"
rss=$(vm VmRSS) hwm=$(vm VmHWM)
echo "$(cat "$WORK/bighello.out")"
echo "server memory after it: VmRSS $((rss / 1024)) MiB, VmHWM $((hwm / 1024)) MiB (before: VmHWM $((hwm0 / 1024)) MiB)"
has bighello "^112-byte hello: refused the client's parameters: qps \(-q\) 256 x region per QP \(--window\) 16 MiB = 4 GiB of memory, more than this server's limit of 1 GiB \(--max-memory\)"
has a "refused the client at 127.0.0.1:[0-9]+: qps \(-q\) 256 x .*limit of 1 GiB \(--max-memory\)"
(( hwm < 256 * 1024 )) || fail "server peak RSS $((hwm / 1024)) MiB after a 4 GiB request (want < 256 MiB)"
alive "a 4 GiB hello"
stop a "stopped by SIGINT: 2 session\(s\), 1 completed, 1 failed; 7 stray connection\(s\) dropped"

# 3. A header a byte a second: dropped at --hello-timeout (2 s) for the whole hello, not per byte.
start_server b --hello-timeout 2 --max-memory 64MiB
"$PY" "$WORK/oob.py" slow "$PORT" "$WORK/slow.started" >"$WORK/slow.out" 2>&1 || fail "slow header: $(cat "$WORK/slow.out")"
echo "$(cat "$WORK/slow.out")"
has slow "not an mrc perf client: no hello within 2 s \(--hello-timeout\): [0-9]+ of 12 header bytes came"
has b "dropped the connection from 127.0.0.1:[0-9]+: no hello within 2 s \(--hello-timeout\): [0-9]+ of 12 header bytes came"

# 4. Garbage and a header announcing 4 GiB, next to a silent connection, then a real client.
hwm0=$(vm VmHWM)
"$PY" "$WORK/oob.py" garbage "$PORT" "$WORK/garbage.ready" "$WORK/garbage.release" >"$WORK/garbage.out" 2>&1 &
GARBAGE=$!
PIDS+=("$GARBAGE")
wait_for "$WORK/garbage.ready" ready "$GARBAGE" 30
client beside_garbage -s 64KiB -n 20
: >"$WORK/garbage.release"
wait "$GARBAGE" || fail "garbage: $(cat "$WORK/garbage.out")"
hwm=$(vm VmHWM)
echo "$(cat "$WORK/garbage.out")"
echo "client next to them: exit $RC; server VmHWM $((hwm / 1024)) MiB (before: $((hwm0 / 1024)) MiB)"
[[ $RC -eq 0 ]] || fail "client next to garbage: exit $RC, want 0"
has garbage "^garbage: not an mrc perf client: oob: bad magic"
has garbage "^4 GiB header: not an mrc perf client: oob: message body too large \(4294967295 bytes; a type 2 message has at most 8196\)"
has garbage "^silent neighbour still open after them: True"
has garbage "^silent neighbour, once a client came: server busy with another client"
(( hwm - hwm0 < 64 * 1024 )) || fail "server peak RSS grew by $(((hwm - hwm0) / 1024)) MiB for garbage"

# 5. --max-memory 64MiB: a client asking for 2 x 64 MiB is told why.
client toobig -q 2 --window 64MiB -n 4
echo "client with -q 2 --window 64MiB: exit $RC: $(tail -n1 "$WORK/toobig.err")"
[[ $RC -eq 1 ]] || fail "too big: client exit $RC, want 1"
has toobig "the server ended the session: refused the client's parameters: qps \(-q\) 2 x region per QP \(--window\) 64 MiB = 128 MiB of memory, more than this server's limit of 64 MiB \(--max-memory\)"
alive "a client beyond --max-memory"
stop b "stopped by SIGINT: 2 session\(s\), 1 completed, 1 failed; 3 stray connection\(s\) dropped"
echo PASS
