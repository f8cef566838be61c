#!/usr/bin/env python3
"""Checks the interop vectors (interop_vectors.txt) against an independent reader of our output.

  check_vectors.py decode MRC VECTORS OUT_DIR   `mrc decode` on the hex lines and on a pcap of them
  check_vectors.py tshark TSHARK LUA VECTORS OUT_DIR   tools/wireshark/mrc.lua on that pcap

The pcap is made by text2pcap (Wireshark's own tool, not our pcap writer): every vector in a UDP
datagram to port 4791, then again to 4971. Every expected field of every vector must be printed with
its value; the ICRC must match. Exit 0 if all do, 1 otherwise (every difference is listed).
"""
import json
import os
import shutil
import subprocess
import sys

# docs/wire-format.md field -> the dissector's field (tools/wireshark/mrc.lua).
LUA = {
    "bth.opcode": "mrc.opcode", "bth.se": "mrc.se", "bth.m": "mrc.m", "bth.pad_cnt": "mrc.padcnt",
    "bth.tver": "mrc.tver", "bth.pkey": "mrc.pkey", "bth.dest_qp": "mrc.qpn", "bth.ack_req": "mrc.a",
    "bth.rtx": "mrc.rtx", "bth.ts": "mrc.ts", "bth.psn": "mrc.psn",
    "meth.rqmsn": "mrc.meth.rqmsn", "meth.msn": "mrc.meth.msn",
    "tseth.tx_timestamp": "mrc.tseth.tx_timestamp", "tseth.tsr": "mrc.tseth.tsr", "tseth.ftype": "mrc.tseth.ftype",
    "reth.va": "mrc.reth.va", "reth.rkey": "mrc.reth.rkey", "reth.dma_len": "mrc.reth.dma_len",
    "immdt.imm": "mrc.immdt", "payload.len": "mrc.payload_len",
    "aeth.syndrome": "mrc.aeth.syndrome", "aeth.msn": "mrc.aeth.msn",
    "seth.m": "mrc.sack.m", "seth.pr": "mrc.sack.pr", "seth.ack_psn_offset": "mrc.sack.ack_psn_offset",
    "seth.probe_id": "mrc.sack.probe_id", "seth.entropy": "mrc.sack.entropy", "seth.cack_psn": "mrc.sack.cack_psn",
    "seth.cc_type": "mrc.sack.cc_type", "seth.mpr": "mrc.sack.mpr", "seth.sack_offset": "mrc.sack.offset",
    "seth.sack_bitmap": "mrc.sack.bitmap", "cc_state.tx_timestamp": "mrc.cc.tx_timestamp",
    "cc_state.ooo_count": "mrc.cc.ooo_count", "cc_state.restore_cwnd": "mrc.cc.restore_cwnd",
    "cc_state.rcv_cwnd_pen": "mrc.cc.rcv_cwnd_pen", "cc_state.rcvd_bytes": "mrc.cc.rcvd_bytes",
    "neth.reason": "mrc.nack.reason", "neth.vendor_info": "mrc.nack.vendor_info", "neth.entropy": "mrc.nack.entropy",
    "neth.nack_psn": "mrc.nack.psn", "neth.cc_type": "mrc.nack.cc_type", "neth.tx_timestamp": "mrc.nack.tx_timestamp",
    "peth.vendor_info": "mrc.peth.vendor_info", "peth.probe_id": "mrc.peth.probe_id",
    "peth.tx_timestamp": "mrc.peth.tx_timestamp", "peth.tsr": "mrc.peth.tsr", "peth.ftype": "mrc.peth.ftype",
    "erth.op": "mrc.erth.op", "erth.vendor_info": "mrc.erth.vendor_info",
    "erth.port_status_mask": "mrc.erth.port_status_mask", "erth.tx_timestamp": "mrc.erth.tx_timestamp",
    "erth.tsr": "mrc.erth.tsr", "erth.ftype": "mrc.erth.ftype",
    "eeth.op": "mrc.eeth.op", "eeth.tx_timestamp": "mrc.eeth.tx_timestamp",
}


def load(path):
    out = []
    for line in open(path):
        if not line.strip() or line.startswith("#"):
            continue
        name, hexs, fields = (x.strip() for x in line.split("|"))
        exp = {}
        for kv in fields.split():
            k, v = kv.split("=")
            exp[k] = int(v, 0)
        out.append((name, bytes.fromhex(hexs.replace(" ", "")), exp))
    return out


def value(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, str):
        if v in ("True", "False"):
            return int(v == "True")
        return int(v, 0)
    return int(v)


def make_pcap(vectors, out_dir):
    """One frame per vector to port 4791, then the same to 4971 (text2pcap: Ethernet/IPv4/UDP)."""
    text2pcap = shutil.which("text2pcap")
    if not text2pcap:
        sys.exit("FAIL: text2pcap not found (it comes with tshark)")
    pcaps = []
    for port in (4791, 4971):
        txt = os.path.join(out_dir, f"vectors_{port}.txt")
        with open(txt, "w") as f:
            for _, b, _ in vectors:
                for off in range(0, len(b), 16):
                    f.write("%06x %s\n" % (off, " ".join("%02x" % x for x in b[off:off + 16])))
                f.write("\n")
        pcap = os.path.join(out_dir, f"vectors_{port}.pcap")
        subprocess.run([text2pcap, "-q", "-F", "pcap", "-4", "10.0.0.1,10.0.0.2", "-u", f"49152,{port}", txt, pcap],
                       check=True)
        pcaps.append(pcap)
    merged = os.path.join(out_dir, "vectors.pcap")
    with open(merged, "wb") as out:  # classic pcap: the second file's records after the first's
        a = open(pcaps[0], "rb").read()
        b = open(pcaps[1], "rb").read()
        out.write(a + b[24:])
    return merged


def compare(vectors, got, what):
    """got: one dict per frame, field name (docs) -> value, in vector order, twice (two ports)."""
    bad = checked = 0
    n = len(vectors)
    if len(got) != 2 * n and len(got) != n:
        print(f"FAIL [{what}]: {len(got)} packets decoded, expected {n} or {2 * n}")
        return 1
    for i, fields in enumerate(got):
        name, _, exp = vectors[i % n]
        for k, want in exp.items():
            if k not in fields:
                print(f"FAIL [{what}] {name}: no {k}")
                bad += 1
            elif value(fields[k]) != want:
                print(f"FAIL [{what}] {name}: {k} = {fields[k]}, expected {want}")
                bad += 1
            else:
                checked += 1
    print(f"[{what}] {checked} field values matched in {len(got)} packets")
    return 1 if bad else 0


def flat(obj):
    out = {}
    for h, v in obj.items():
        if isinstance(v, dict):
            for k, x in v.items():
                out[f"{h}.{k}"] = x
    return out


def run_decode(mrc, vectors, out_dir):
    rc = 0
    text = "\n".join(b.hex() for _, b, _ in vectors) + "\n"
    p = subprocess.run([mrc, "decode"], input=text.encode(), capture_output=True)
    if p.returncode != 0:
        print("FAIL: mrc decode (hex) exited", p.returncode, p.stderr.decode())
        return 1
    objs = [json.loads(l) for l in p.stdout.decode().splitlines()]
    rc |= compare(vectors, [flat(o) for o in objs], "mrc decode hex")
    for o in objs:
        if not o["icrc"]["mrc"]:
            print("FAIL: ICRC mismatch in", o["frame"])
            rc = 1
    pcap = make_pcap(vectors, out_dir)
    p = subprocess.run([mrc, "decode", pcap], capture_output=True)
    if p.returncode != 0:
        print("FAIL: mrc decode (pcap) exited", p.returncode, p.stderr.decode())
        return 1
    objs = [json.loads(l) for l in p.stdout.decode().splitlines()]
    rc |= compare(vectors, [flat(o) for o in objs], "mrc decode pcap")
    ports = sorted({o["udp"]["dst_port"] for o in objs})
    if ports != [4791, 4971]:
        print("FAIL: ports seen", ports)
        rc = 1
    # Only --port 4791: half of them.
    p = subprocess.run([mrc, "decode", "--port", "4791", pcap], capture_output=True)
    if len(p.stdout.decode().splitlines()) != len(vectors):
        print("FAIL: --port 4791 did not select the 4791 frames only")
        rc = 1
    return rc


def run_tshark(tshark, lua, vectors, out_dir):
    pcap = make_pcap(vectors, out_dir)
    keys = sorted({k for _, _, e in vectors for k in e})
    missing = [k for k in keys if k not in LUA]
    if missing:
        print("FAIL: no dissector field for", missing)
        return 1
    args = [tshark, "-n", "-r", pcap, "-X", f"lua_script:{lua}", "-T", "fields", "-E", "occurrence=f",
            "-e", "mrc.icrc.good"]
    for k in keys:
        args += ["-e", LUA[k]]
    env = dict(os.environ, HOME=out_dir)
    p = subprocess.run(args, capture_output=True, env=env)
    err = "\n".join(l for l in p.stderr.decode().splitlines() if "Running as user" not in l)
    if p.returncode != 0 or err.strip():
        print("FAIL: tshark:", p.returncode, err)
        return 1
    got = []
    rc = 0
    for i, line in enumerate(p.stdout.decode().splitlines()):
        cols = line.split("\t")
        if value(cols[0] or "0") != 1:
            print("FAIL [mrc.lua]: ICRC not good in frame", i + 1)
            rc = 1
        got.append({k: c for k, c in zip(keys, cols[1:]) if c != ""})
    return rc | compare(vectors, got, "mrc.lua")


def main():
    mode = sys.argv[1]
    if mode == "decode":
        mrc, path, out_dir = sys.argv[2:5]
        os.makedirs(out_dir, exist_ok=True)
        rc = run_decode(mrc, load(path), out_dir)
    elif mode == "tshark":
        tshark, lua, path, out_dir = sys.argv[2:6]
        os.makedirs(out_dir, exist_ok=True)
        rc = run_tshark(tshark, lua, load(path), out_dir)
    else:
        sys.exit("usage: check_vectors.py decode MRC VECTORS OUT_DIR | tshark TSHARK LUA VECTORS OUT_DIR")
    print("check_vectors:", "OK" if rc == 0 else "FAILED")
    sys.exit(rc)


if __name__ == "__main__":
    main()
