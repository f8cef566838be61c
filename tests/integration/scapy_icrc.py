#!/usr/bin/env python3
"""Recomputes the RoCEv2 ICRC of every MRC frame of pcap captures with scapy (scapy.contrib.roce,
code this project did not write) and compares it with the ICRC the frame carries (docs/wire-format.md
W22). Frames are UDP datagrams to one of --port (default 4791 and 4971); a datagram that is only a
header stack (trimmed) has no ICRC and is not counted. Before trusting a capture, the check must be able
to fail: the first frame with one payload bit flipped must no longer match.

Usage: scapy_icrc.py [--port N ...] [--min N] CAPTURE...   (exit 1 on any mismatch or too few frames)
"""
import argparse
import sys

from scapy.all import IP, IPv6, UDP, bind_layers, rdpcap
from scapy.contrib.roce import BTH


def recomputed(ip_bytes):
    """The ICRC scapy computes for an IPv4 packet whose UDP payload is BTH .. ICRC."""
    return IP(ip_bytes)[BTH].compute_icrc(None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, action="append")
    ap.add_argument("--min", type=int, default=1, help="fewest frames a capture must hold")
    ap.add_argument("captures", nargs="+")
    a = ap.parse_args()
    ports = a.port or [4791, 4971]
    for p in ports:
        bind_layers(UDP, BTH, dport=p)
    failed = False
    for cap in a.captures:
        good = bad = other = 0
        first = None
        for pkt in rdpcap(cap):
            if IPv6 in pkt and IP not in pkt:
                other += 1  # scapy 2.5 computes the RoCEv2 ICRC for IPv4 only
                continue
            if IP not in pkt or UDP not in pkt or pkt[UDP].dport not in ports:
                continue
            ip = bytes(pkt[IP])[: pkt[IP].len]
            mrc = bytes(pkt[UDP].payload)
            if len(mrc) <= 12 + 4 or pkt[IP].flags.MF or pkt[IP].frag:
                other += 1
                continue
            if first is None:
                first = ip
            if recomputed(ip) == mrc[-4:]:
                good += 1
            else:
                bad += 1
                if bad <= 3:
                    print(f"{cap}: ICRC {mrc[-4:].hex()} but scapy computes {recomputed(ip).hex()} "
                          f"(IPv4 id {pkt[IP].id}, {len(mrc)} bytes)", file=sys.stderr)
        if first is not None:
            flipped = bytearray(first)
            flipped[-5] ^= 0x01  # the last byte before the ICRC
            if recomputed(bytes(flipped)) == first[-4:]:
                print(f"{cap}: a flipped bit left scapy's ICRC unchanged: the check cannot fail", file=sys.stderr)
                failed = True
        print(f"{cap}: {good} frames with the RoCEv2 ICRC scapy computes, {bad} without, {other} not checked")
        if bad != 0 or good < a.min:
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
