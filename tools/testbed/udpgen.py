#!/usr/bin/env python3
"""Tiny UDP traffic generator / sink for the mrc testbed (plain sockets, no MRC protocol).

  udpgen.py send --dst ADDR [--port 4791] [--count N] [--sport A[-B]] [--flowlabel A[-B]]
                 [--rate PPS] [--size BYTES] [--src ADDR] [--srv6-final ADDR] [--log FILE]
  udpgen.py recv [--port 4791] [--expect N] [--timeout S] [--idle S] [--ready FILE] [--out FILE]

send: datagram i carries b"MRCT" + seq(u32) + padding. Source ports and explicit IPv6 flow labels
are cycled over the given ranges (one socket per source port). --srv6-final makes the sender build
the IPv6+UDP header itself on a raw socket: the packet is addressed to --dst (a uSID carrier) but
the UDP checksum is computed over --srv6-final, the address the packet will carry when it arrives.
--log writes "seq monotonic_time" per datagram.
recv: a dual-stack socket on [::]:port counts datagrams until --expect arrived, --idle seconds passed
without one (after the first) or --timeout expired; prints JSON {received, unique, seqs, by_dst}.
"""
import argparse
import json
import socket
import struct
import sys
import time

IPV6_FLOWINFO_SEND = 33  # linux/in6.h


def parse_range(text, lo, hi, what):
    try:
        if "-" in text:
            a, b = (int(x, 0) for x in text.split("-", 1))
        else:
            a = b = int(text, 0)
    except ValueError:
        sys.exit(f"udpgen: bad {what} range {text!r}")
    if not (lo <= a <= b <= hi):
        sys.exit(f"udpgen: {what} range {text!r} outside {lo}..{hi}")
    return list(range(a, b + 1))


def csum16(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def raw_v6_udp(src, final_dst, carrier, sport, dport, label, payload):
    ulen = 8 + len(payload)
    s_b = socket.inet_pton(socket.AF_INET6, src)
    f_b = socket.inet_pton(socket.AF_INET6, final_dst)
    c_b = socket.inet_pton(socket.AF_INET6, carrier)
    pseudo = s_b + f_b + struct.pack("!IxxxB", ulen, 17)
    udp = struct.pack("!HHHH", sport, dport, ulen, 0) + payload
    c = csum16(pseudo + udp) or 0xFFFF
    udp = udp[:6] + struct.pack("!H", c) + udp[8:]
    hdr = struct.pack("!IHBB", (6 << 28) | (label & 0xFFFFF), ulen, 17, 64) + s_b + c_b
    return hdr + udp


def do_send(a):
    v6 = ":" in a.dst
    sports = parse_range(a.sport, 1, 65535, "sport")
    labels = parse_range(a.flowlabel, 0, 0xFFFFF, "flowlabel") if a.flowlabel else None
    if labels and not v6:
        sys.exit("udpgen: --flowlabel needs an IPv6 destination")
    if a.count < 1 or a.count > 10_000_000 or a.size < 8 or a.size > 9000 or a.rate < 0:
        sys.exit("udpgen: bad --count/--size/--rate")
    fam = socket.AF_INET6 if v6 else socket.AF_INET
    raw = None
    socks = {}
    if a.srv6_final:
        if not (v6 and a.src):
            sys.exit("udpgen: --srv6-final needs an IPv6 --dst and --src")
        raw = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
    else:
        for sp in sports:
            s = socket.socket(fam, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if labels:
                s.setsockopt(socket.IPPROTO_IPV6, IPV6_FLOWINFO_SEND, 1)
            s.bind((a.src or ("::" if v6 else "0.0.0.0"), sp))
            socks[sp] = s
    log = open(a.log, "w") if a.log else None
    pad = b"\0" * (a.size - 8)
    t0 = time.monotonic()
    sent = 0
    for i in range(a.count):
        if a.rate:
            due = t0 + i / a.rate
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
        sp = sports[i % len(sports)]
        lb = labels[i % len(labels)] if labels else 0
        payload = b"MRCT" + struct.pack("!I", i) + pad
        try:
            if raw is not None:
                raw.sendto(raw_v6_udp(a.src, a.srv6_final, a.dst, sp, a.port, lb, payload), (a.dst, 0))
            elif v6:
                socks[sp].sendto(payload, (a.dst, a.port, lb, 0))
            else:
                socks[sp].sendto(payload, (a.dst, a.port))
            sent += 1
        except OSError as e:  # e.g. ENETUNREACH while a route is being repaired: count it, go on
            print(f"udpgen: send seq {i}: {e}", file=sys.stderr)
        if log:
            log.write(f"{i} {time.monotonic():.6f}\n")
    if log:
        log.close()
    print(json.dumps({"sent": sent, "attempted": a.count, "seconds": round(time.monotonic() - t0, 3)}))


def do_recv(a):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RECVPKTINFO, 1)
    try:
        s.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE (root)
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    s.bind(("::", a.port))
    if a.ready:
        with open(a.ready, "w") as f:
            f.write("ready\n")
    seqs = []
    by_dst = {}
    start = time.monotonic()
    last = None
    while len(seqs) < a.expect if a.expect else True:
        now = time.monotonic()
        left = a.timeout - (now - start)
        if last is not None:
            left = min(left, a.idle - (now - last))
        if left <= 0:
            break
        s.settimeout(left)
        try:
            data, anc, _flags, _src = s.recvmsg(65535, 256)
        except socket.timeout:
            break
        last = time.monotonic()
        if len(data) >= 8 and data[:4] == b"MRCT":
            seqs.append(struct.unpack("!I", data[4:8])[0])
        for lvl, typ, val in anc:
            if lvl == socket.IPPROTO_IPV6 and typ == socket.IPV6_PKTINFO:
                d = socket.inet_ntop(socket.AF_INET6, val[:16])
                if d.startswith("::ffff:"):
                    d = d[7:]
                by_dst[d] = by_dst.get(d, 0) + 1
    out = {"received": len(seqs), "unique": len(set(seqs)), "seqs": sorted(set(seqs)), "by_dst": by_dst}
    text = json.dumps(out)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


def main():
    p = argparse.ArgumentParser(prog="udpgen.py")
    sub = p.add_subparsers(dest="cmd", required=True)
    ps = sub.add_parser("send")
    ps.add_argument("--dst", required=True)
    ps.add_argument("--port", type=int, default=4791)
    ps.add_argument("--count", type=int, default=1000)
    ps.add_argument("--sport", default="49152")
    ps.add_argument("--flowlabel")
    ps.add_argument("--rate", type=float, default=0.0, help="datagrams per second, 0 = as fast as possible")
    ps.add_argument("--size", type=int, default=64)
    ps.add_argument("--src")
    ps.add_argument("--srv6-final")
    ps.add_argument("--log")
    pr = sub.add_parser("recv")
    pr.add_argument("--port", type=int, default=4791)
    pr.add_argument("--expect", type=int, default=0)
    pr.add_argument("--timeout", type=float, default=10.0)
    pr.add_argument("--idle", type=float, default=1.0)
    pr.add_argument("--ready")
    pr.add_argument("--out")
    a = p.parse_args()
    do_send(a) if a.cmd == "send" else do_recv(a)


if __name__ == "__main__":
    main()
