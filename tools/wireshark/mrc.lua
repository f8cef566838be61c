-- Wireshark/tshark dissector for MRC (Multipath Reliable Connection) over UDP port 4791 (and 4971,
-- the port some readers report the OCP MRC 1.0 PDF prints; a preference adds another).
--
-- Decodes the layouts of docs/wire-format.md (the project's provisional reading of OCP MRC 1.0):
-- BTH with MRC opcodes 0xC6-0xCB (RDMA WRITE data), 0xD1 (Transport ACK, AETH), 0xD8 (endpoint
-- request, ERTH), 0xD9 (endpoint response, EETH), 0xDC (SACK, SETH + CC_STATE), 0xDD (NACK, NETH),
-- 0xDE (reliability probe, PETH); METH, optional TSETH, RETH, ImmDt; payload, pad and ICRC.
--
-- Field choices where the public sources disagree are those of docs/wire-format.md §7 (F1-F11): BTH
-- byte 1 M = bit 7, SE = bit 6; a probe SACK's id in the ack_psn_offset bytes; EETH op in bits 1-0
-- (or 3-2 / 5-4 when unambiguous) and no ftype in EETH bytes 30-31. The project's own extension
-- fields (SACK svc_time and cc_flags bits, ERTH/EETH EV echo, EETH service time and port mask) are
-- shown with the "ext" preference (on by default: the engine sends them unless wire_ext is off).
--
-- Registration: the script replaces the "udp.port" 4791 entry (by default Wireshark's RoCEv2
-- dissector, protocol "infiniband") with itself, and keeps the handle it replaced. Packets whose BTH
-- opcode is outside the vendor range 0xC0-0xDF (i.e. ordinary RoCEv2 traffic) are handed back to that
-- original handle unchanged, so RoCEv2 and MRC can share one capture. See README.md for why this is
-- used rather than a heuristic dissector.
--
-- Usage: tshark -X lua_script:tools/wireshark/mrc.lua -r capture.pcap -V
-- Written for Wireshark 4.0 (Lua 5.2); no code from other projects.

local mrc = Proto("mrc", "Multipath Reliable Connection")

-------------------------------------------------------------------------------------------------
-- Value tables (docs/wire-format.md §1, §4)

local OP = {
  WRITE_FIRST = 0xC6, WRITE_MIDDLE = 0xC7, WRITE_LAST = 0xC8, WRITE_LAST_IMM = 0xC9,
  WRITE_ONLY = 0xCA, WRITE_ONLY_IMM = 0xCB, ACK = 0xD1, EP_REQUEST = 0xD8, EP_RESPONSE = 0xD9,
  SACK = 0xDC, NACK = 0xDD, PROBE = 0xDE,
}
local opcode_names = {}
for name, v in pairs(OP) do opcode_names[v] = name end

-- Header stack size (BTH .. last extension header) without TSETH; TSETH adds 4 to data opcodes.
local header_size = {
  [0xC6] = 32, [0xC7] = 32, [0xC8] = 32, [0xC9] = 36, [0xCA] = 32, [0xCB] = 36,
  [0xD1] = 16, [0xD8] = 28, [0xD9] = 48, [0xDC] = 48, [0xDD] = 32, [0xDE] = 28,
}

local nack_reasons = {
  [0x01] = "TRIMMED", [0x02] = "TRIMMED_LASTHOP", [0x06] = "NO_BITMAP", [0x07] = "NO_PKT_BUFFER",
  [0x0A] = "NO_RESOURCE", [0x0B] = "PSN_OOR_WINDOW", [0x19] = "UNEXP_EVENT",
}
local aeth_syndromes = {
  [0x00] = "ACK", [0x60] = "NAK_PSN_SEQ_ERROR", [0x61] = "NAK_INVALID_REQUEST",
  [0x62] = "NAK_REMOTE_ACCESS_ERROR", [0x63] = "NAK_REMOTE_OP_ERROR",
}
local sack_modes = { [0] = "NONE", [1] = "SKIP_ONCE", [2] = "ALWAYS_SKIP", [3] = "INVALID" }
local ep_ops = { [0] = "PORT_STATUS_UPDATE", [1] = "EV_PROBE", [2] = "INVALID", [3] = "INVALID" }

-------------------------------------------------------------------------------------------------
-- Fields

local F = {}
local function field(key, pf) F[key] = pf end

-- BTH
field("bth", ProtoField.bytes("mrc.bth", "Base Transport Header"))
field("opcode", ProtoField.uint8("mrc.opcode", "Opcode", base.HEX, opcode_names))
field("m", ProtoField.bool("mrc.m", "MigReq (M)", 8, nil, 0x80))
field("se", ProtoField.bool("mrc.se", "Solicited Event (SE)", 8, nil, 0x40))
field("padcnt", ProtoField.uint8("mrc.padcnt", "Pad count", base.DEC, nil, 0x30))
field("tver", ProtoField.uint8("mrc.tver", "Transport header version (TVer)", base.DEC, nil, 0x0F))
field("pkey", ProtoField.uint16("mrc.pkey", "P_Key", base.HEX))
field("resv8", ProtoField.uint8("mrc.resv8", "Reserved (resv8)", base.HEX))
field("qpn", ProtoField.uint24("mrc.qpn", "Destination QP", base.HEX))
field("a", ProtoField.bool("mrc.a", "Acknowledge request (A)", 8, nil, 0x80))
field("rtx", ProtoField.bool("mrc.rtx", "Retransmission (RTX)", 8, nil, 0x20))
field("ts", ProtoField.bool("mrc.ts", "TSETH present (TS)", 8, nil, 0x10))
field("psn", ProtoField.uint24("mrc.psn", "Packet sequence number (PSN)", base.DEC))
field("request_id", ProtoField.uint16("mrc.request_id", "Endpoint request id (PSN[15:0])", base.DEC))
-- METH, TSETH, RETH, ImmDt
field("meth", ProtoField.bytes("mrc.meth", "Message Extended Transport Header (METH)"))
field("meth_rqmsn", ProtoField.uint16("mrc.meth.rqmsn", "RQMSN (WRITE_IMM sequence number)", base.DEC))
field("meth_msn", ProtoField.uint16("mrc.meth.msn", "MSN (message sequence number)", base.DEC))
field("tseth", ProtoField.bytes("mrc.tseth", "Timestamp Extended Header (TSETH)"))
field("tseth_ts", ProtoField.uint16("mrc.tseth.tx_timestamp", "TX timestamp (128 ns units)", base.DEC))
field("tseth_tsr", ProtoField.bool("mrc.tseth.tsr", "TSR", 16, nil, 0x8000))
field("tseth_ftype", ProtoField.uint16("mrc.tseth.ftype", "ftype", base.DEC, nil, 0x000F))
field("reth", ProtoField.bytes("mrc.reth", "RDMA Extended Transport Header (RETH)"))
field("reth_va", ProtoField.uint64("mrc.reth.va", "Virtual address", base.HEX))
field("reth_rkey", ProtoField.uint32("mrc.reth.rkey", "R_Key", base.HEX))
field("reth_dmalen", ProtoField.uint32("mrc.reth.dma_len", "DMA length (whole message)", base.DEC))
field("immdt", ProtoField.uint32("mrc.immdt", "Immediate data (ImmDt)", base.HEX))
-- AETH
field("aeth", ProtoField.bytes("mrc.aeth", "ACK Extended Transport Header (AETH)"))
field("aeth_syndrome", ProtoField.uint8("mrc.aeth.syndrome", "Syndrome", base.HEX, aeth_syndromes))
field("aeth_msn", ProtoField.uint24("mrc.aeth.msn", "MSN", base.DEC))
-- Prologue shared by SETH/NETH/PETH/ERTH/EETH
field("prologue", ProtoField.uint16("mrc.prologue", "type/next_hdr prologue (reserved in MRC v1)", base.HEX, nil,
                                    0xFF80))

-- cc_flags bits exist in both SETH and NETH: one set of fields per prefix.
local function cc_flag_fields(prefix)
  field(prefix .. "_cc_type", ProtoField.uint8("mrc." .. prefix .. ".cc_type", "CC type", base.DEC, nil, 0xF0))
  field(prefix .. "_cc_flags", ProtoField.uint8("mrc." .. prefix .. ".cc_flags", "CC flags", base.HEX, nil, 0x0F))
  field(prefix .. "_f_dup", ProtoField.bool("mrc." .. prefix .. ".cc_flags.dup_echo", "Duplicate echo", 8, nil, 0x08))
  field(prefix .. "_f_ecn", ProtoField.bool("mrc." .. prefix .. ".cc_flags.ecn_echo", "ECN-CE echo", 8, nil, 0x04))
  field(prefix .. "_f_svc", ProtoField.bool("mrc." .. prefix .. ".cc_flags.svc_time_valid", "svc_time valid", 8, nil,
                                            0x02))
  field(prefix .. "_f_rtx", ProtoField.bool("mrc." .. prefix .. ".cc_flags.rtx_echo", "RTX echo", 8, nil, 0x01))
end

-- SETH + CC_STATE
field("seth", ProtoField.bytes("mrc.sack", "SACK Extended Header (SETH)"))
field("sack_m", ProtoField.uint8("mrc.sack.m", "m (EV action)", base.DEC, sack_modes, 0x60))
field("sack_pr", ProtoField.bool("mrc.sack.pr", "pr (answers a probe)", 8, nil, 0x02))
field("sack_ackoff", ProtoField.int16("mrc.sack.ack_psn_offset", "ack_psn_offset", base.DEC))
field("sack_psn", ProtoField.uint24("mrc.sack.psn", "Triggering PSN (cack_psn + ack_psn_offset)", base.DEC))
field("sack_entropy", ProtoField.uint32("mrc.sack.entropy", "Entropy (EV)", base.HEX))
field("sack_svc", ProtoField.uint16("mrc.sack.svc_time", "Service time (32 ns units; project extension)", base.DEC))
field("sack_spdcid", ProtoField.uint16("mrc.sack.spdcid", "Source PDCID (unused by MRC)", base.HEX))
field("sack_dpdcid", ProtoField.uint16("mrc.sack.dpdcid", "Destination PDCID (unused by MRC)", base.HEX))
field("sack_probe_id", ProtoField.uint16("mrc.sack.probe_id", "Probe id (pr = 1: in the ack_psn_offset bytes)",
                                         base.DEC))
field("sack_cack", ProtoField.uint24("mrc.sack.cack_psn", "Cumulative ACK PSN", base.DEC))
cc_flag_fields("sack")
field("sack_mpr", ProtoField.uint8("mrc.sack.mpr", "MPR (128-PSN units, 0 = none)", base.DEC))
field("sack_offset", ProtoField.int16("mrc.sack.offset", "sack_offset", base.DEC))
field("sack_base", ProtoField.uint24("mrc.sack.base_psn", "Bitmap base PSN (cack_psn + sack_offset)", base.DEC))
field("sack_bitmap", ProtoField.uint64("mrc.sack.bitmap", "SACK bitmap", base.HEX))
field("sack_count", ProtoField.uint8("mrc.sack.bitmap_count", "PSNs marked received in the bitmap", base.DEC))
field("sack_received", ProtoField.string("mrc.sack.received", "Received PSNs (bitmap)"))
field("cc", ProtoField.bytes("mrc.cc", "CC_STATE"))
field("cc_ts", ProtoField.uint16("mrc.cc.tx_timestamp", "Reflected TX timestamp", base.DEC))
field("cc_ooo", ProtoField.uint16("mrc.cc.ooo_count", "Out-of-order count", base.DEC, nil, 0x7FFF))
field("cc_rc", ProtoField.bool("mrc.cc.restore_cwnd", "Restore cwnd (r_c)", 8, nil, 0x80))
field("cc_pen", ProtoField.uint8("mrc.cc.rcv_cwnd_pen", "Receiver cwnd penalty", base.DEC, nil, 0x7F))
field("cc_bytes", ProtoField.uint24("mrc.cc.rcvd_bytes", "Received bytes (256-byte units)", base.DEC))
-- NETH
field("neth", ProtoField.bytes("mrc.nack", "NACK Extended Header (NETH)"))
field("nack_reason", ProtoField.uint8("mrc.nack.reason", "Reason", base.HEX, nack_reasons))
field("nack_vendor", ProtoField.uint8("mrc.nack.vendor_info", "Vendor info", base.HEX))
field("nack_entropy", ProtoField.uint32("mrc.nack.entropy", "Entropy (EV)", base.HEX))
field("nack_psn", ProtoField.uint24("mrc.nack.psn", "NACK PSN", base.DEC))
cc_flag_fields("nack")
field("nack_ts", ProtoField.uint16("mrc.nack.tx_timestamp", "Reflected TX timestamp", base.DEC))
-- PETH
field("peth", ProtoField.bytes("mrc.peth", "Probe Extended Header (PETH)"))
field("peth_vendor", ProtoField.uint8("mrc.peth.vendor_info", "Vendor info", base.HEX))
field("peth_probe_id", ProtoField.uint16("mrc.peth.probe_id", "Probe id", base.DEC))
field("peth_ts", ProtoField.uint16("mrc.peth.tx_timestamp", "TX timestamp (128 ns units)", base.DEC))
field("peth_tsr", ProtoField.bool("mrc.peth.tsr", "TSR", 16, nil, 0x8000))
field("peth_ftype", ProtoField.uint16("mrc.peth.ftype", "ftype", base.DEC, nil, 0x000F))
-- ERTH
field("erth", ProtoField.bytes("mrc.erth", "Endpoint Request Header (ERTH)"))
field("erth_op", ProtoField.uint8("mrc.erth.op", "Operation", base.DEC, ep_ops, 0x03))
field("erth_vendor", ProtoField.uint8("mrc.erth.vendor_info", "Vendor info", base.HEX))
field("erth_mask", ProtoField.uint32("mrc.erth.port_status_mask", "Port status mask", base.HEX))
field("erth_entropy", ProtoField.uint32("mrc.erth.entropy", "Entropy (EV)", base.HEX))
field("erth_ts", ProtoField.uint16("mrc.erth.tx_timestamp", "TX timestamp (128 ns units)", base.DEC))
field("erth_tsr", ProtoField.bool("mrc.erth.tsr", "TSR", 16, nil, 0x8000))
field("erth_ftype", ProtoField.uint16("mrc.erth.ftype", "ftype", base.DEC, nil, 0x000F))
-- EETH
field("eeth", ProtoField.bytes("mrc.eeth", "Endpoint Response Header (EETH)"))
field("eeth_op", ProtoField.uint8("mrc.eeth.op", "Operation", base.DEC, ep_ops))
field("eeth_svc_valid", ProtoField.bool("mrc.eeth.svc_time_valid", "Service time valid", 8, nil, 0x80))
field("eeth_mask_valid", ProtoField.bool("mrc.eeth.port_status_valid", "Port status mask valid", 8, nil, 0x40))
field("eeth_vendor", ProtoField.uint8("mrc.eeth.vendor_info", "Vendor info", base.HEX))
field("eeth_entropy", ProtoField.uint32("mrc.eeth.entropy", "Entropy (echoed EV)", base.HEX))
field("eeth_svc", ProtoField.uint32("mrc.eeth.svc_time_ns", "Service time (ns)", base.DEC))
field("eeth_mask", ProtoField.uint32("mrc.eeth.port_status_mask", "Port status mask", base.HEX))
field("eeth_ts", ProtoField.uint16("mrc.eeth.tx_timestamp", "Echoed TX timestamp", base.DEC))
-- Payload, pad, ICRC
field("payload_len", ProtoField.uint32("mrc.payload_len", "Payload length", base.DEC))
field("payload", ProtoField.bytes("mrc.payload", "Payload"))
field("pad", ProtoField.bytes("mrc.pad", "Pad"))
field("trimmed", ProtoField.bool("mrc.trimmed", "Trimmed (header stack only, no payload/ICRC)"))
field("icrc", ProtoField.uint32("mrc.icrc", "ICRC", base.HEX))
field("icrc_computed", ProtoField.uint32("mrc.icrc.computed", "ICRC (computed)", base.HEX))
field("icrc_good", ProtoField.bool("mrc.icrc.good", "ICRC good"))
field("icrc_rocev2", ProtoField.bool("mrc.icrc.rocev2", "RoCEv2 ICRC (masked IP/UDP headers) good"))
field("icrc_no_ip", ProtoField.bool("mrc.icrc.no_ip", "ICRC without IP/UDP headers (W16) good"))

local field_list = {}
for _, pf in pairs(F) do field_list[#field_list + 1] = pf end
mrc.fields = field_list

local E = {
  bad_tver = ProtoExpert.new("mrc.expert.bad_tver", "TVer is not 0 (MRC v1)", expert.group.MALFORMED,
                             expert.severity.ERROR),
  bad_field = ProtoExpert.new("mrc.expert.bad_field", "Invalid header field", expert.group.MALFORMED,
                              expert.severity.ERROR),
  truncated = ProtoExpert.new("mrc.expert.truncated", "Packet shorter than its header stack",
                              expert.group.MALFORMED, expert.severity.ERROR),
  unknown_op = ProtoExpert.new("mrc.expert.unknown_opcode", "Opcode in the MRC range but not defined by MRC v1",
                               expert.group.UNDECODED, expert.severity.WARN),
  bad_icrc = ProtoExpert.new("mrc.expert.bad_icrc", "ICRC mismatch", expert.group.CHECKSUM, expert.severity.ERROR),
  icrc_no_ip = ProtoExpert.new("mrc.expert.icrc_no_ip",
                               "ICRC without the IP/UDP headers (W16: simulator capture); a RoCEv2 NIC would drop it",
                               expert.group.CHECKSUM, expert.severity.NOTE),
  bad_pad = ProtoExpert.new("mrc.expert.bad_pad", "Bad padding or length", expert.group.MALFORMED,
                            expert.severity.ERROR),
  trimmed = ProtoExpert.new("mrc.expert.trimmed", "Trimmed packet: header stack only", expert.group.SEQUENCE,
                            expert.severity.NOTE),
  nack = ProtoExpert.new("mrc.expert.nack", "NACK", expert.group.SEQUENCE, expert.severity.NOTE),
}
mrc.experts = { E.bad_tver, E.bad_field, E.truncated, E.unknown_op, E.bad_icrc, E.bad_pad, E.trimmed, E.nack,
                E.icrc_no_ip }

mrc.prefs.verify_icrc = Pref.bool("Verify ICRC", true,
                                  "Compute the ICRC and compare (docs/wire-format.md §5): RoCEv2's over the masked " ..
                                  "IP/UDP headers when the frame has them, and the one without them (W16)")
mrc.prefs.ext = Pref.bool("Project wire extensions", true,
                          "Show the mrc project's own fields in bytes the public sources leave reserved " ..
                          "(docs/wire-format.md W20): SACK svc_time and cc_flags bits, ERTH/EETH EV, EETH " ..
                          "service time and port mask")
mrc.prefs.udp_port = Pref.uint("UDP port", 4791,
                               "A further UDP destination port to decode as MRC (4791 and 4971 always are)")

-------------------------------------------------------------------------------------------------
-- ICRC (CRC-32/IEEE, reflected) over 8 x 0xFF | packet with BTH byte 4 = 0xFF | ... up to the ICRC

local band, bxor, rshift, bnot = bit32.band, bit32.bxor, bit32.rshift, bit32.bnot
local crc_table = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if band(c, 1) ~= 0 then c = bxor(0xEDB88320, rshift(c, 1)) else c = rshift(c, 1) end
  end
  crc_table[i] = c
end

local function crc_bytes(crc, s)
  for i = 1, #s do
    crc = bxor(crc_table[band(bxor(crc, s:byte(i)), 0xFF)], rshift(crc, 8))
  end
  return crc
end

-- prefix: RoCEv2's masked IP + UDP headers, or "" (W16)
local function mrc_icrc(tvb, covered_len, prefix)
  local crc = 0xFFFFFFFF
  crc = crc_bytes(crc, string.rep("\255", 8))
  crc = crc_bytes(crc, prefix)
  crc = crc_bytes(crc, tvb:raw(0, 4))
  crc = crc_bytes(crc, "\255")
  if covered_len > 5 then crc = crc_bytes(crc, tvb:raw(5, covered_len - 5)) end
  return bnot(crc)
end

-- The innermost IPv4 / IPv6 header and the UDP ports and length of the datagram, masked as RoCEv2's
-- ICRC sees them (IPv4 TOS, TTL, checksum; IPv6 traffic class, flow label, hop limit; UDP checksum);
-- nil when the frame has neither (raw MRC bytes) or IPv4 options / IPv6 extension headers.
local f_ip, f_ipv6 = Field.new("ip"), Field.new("ipv6")
local f_sport, f_dport, f_ulen = Field.new("udp.srcport"), Field.new("udp.dstport"), Field.new("udp.length")

local function last(...)
  local all = { ... }
  return all[#all]
end

local function masked_ip_udp()
  local sport, dport, ulen = last(f_sport()), last(f_dport()), last(f_ulen())
  if sport == nil or dport == nil or ulen == nil then return nil end
  local ip4, ip6 = last(f_ip()), last(f_ipv6())
  local ip
  if ip4 ~= nil and (ip6 == nil or ip4.offset > ip6.offset) then
    local h = ip4.range
    if h:len() ~= 20 then return nil end
    ip = h:raw(0, 1) .. "\255" .. h:raw(2, 6) .. "\255" .. h:raw(9, 1) .. "\255\255" .. h:raw(12, 8)
  elseif ip6 ~= nil then
    local h = ip6.range
    if h:len() < 40 or h(6, 1):uint() ~= 17 then return nil end
    ip = string.char(bit32.bor(h(0, 1):uint(), 0x0F)) .. "\255\255\255" .. h:raw(4, 3) .. "\255" .. h:raw(8, 32)
  else
    return nil
  end
  local function be16(v) return string.char(rshift(v, 8), band(v, 0xFF)) end
  return ip .. be16(sport.value) .. be16(dport.value) .. be16(ulen.value) .. "\255\255"
end

-------------------------------------------------------------------------------------------------
-- Helpers

-- The prologue is reserved in MRC v1 (sent as 0, not checked by the codec): shown, never flagged.
local function check_prologue(tree, tvb, off)
  tree:add(F.prologue, tvb(off, 2))
end

-- ftype: 1 is the only format the sources define; another value is shown, not treated as malformed.
local function check_ftype(tree, field_pf, tvb, off)
  tree:add(field_pf, tvb(off, 2))
end

-- cc_flags: no public source defines a flag (UET reserves them); the bits are the project's (W9).
local function add_cc_type_flags(tree, prefix, range)
  tree:add(F[prefix .. "_cc_type"], range)
  if not mrc.prefs.ext then return end
  local flags = tree:add(F[prefix .. "_cc_flags"], range)
  flags:add(F[prefix .. "_f_dup"], range)
  flags:add(F[prefix .. "_f_ecn"], range)
  flags:add(F[prefix .. "_f_svc"], range)
  flags:add(F[prefix .. "_f_rtx"], range)
end

local function psn_add(a, b) return (a + b) % 0x1000000 end

local function sack_received_list(base_psn, hi, lo)
  local out, count = {}, 0
  for i = 0, 63 do
    local word, bitpos = lo, i
    if i >= 32 then word, bitpos = hi, i - 32 end
    if band(rshift(word, bitpos), 1) == 1 then
      count = count + 1
      out[#out + 1] = tostring(psn_add(base_psn, i))
    end
  end
  return table.concat(out, ","), count
end

-------------------------------------------------------------------------------------------------
-- Extension headers; each returns nothing and adds to `tree`. `off` is the header's offset in tvb.

local function dissect_data_ext(tvb, tree, opcode, ts, off)
  local meth = tree:add(F.meth, tvb(off, 4))
  meth:add(F.meth_rqmsn, tvb(off, 2))
  meth:add(F.meth_msn, tvb(off + 2, 2))
  off = off + 4
  if ts then
    local t = tree:add(F.tseth, tvb(off, 4))
    t:add(F.tseth_ts, tvb(off, 2))
    t:add(F.tseth_tsr, tvb(off + 2, 2))
    check_ftype(t, F.tseth_ftype, tvb, off + 2)
    off = off + 4
  end
  local r = tree:add(F.reth, tvb(off, 16))
  r:add(F.reth_va, tvb(off, 8))
  r:add(F.reth_rkey, tvb(off + 8, 4))
  r:add(F.reth_dmalen, tvb(off + 12, 4))
  off = off + 16
  if opcode == OP.WRITE_LAST_IMM or opcode == OP.WRITE_ONLY_IMM then
    tree:add(F.immdt, tvb(off, 4))
  end
end

local function dissect_aeth(tvb, tree, off)
  local t = tree:add(F.aeth, tvb(off, 4))
  t:add(F.aeth_syndrome, tvb(off, 1))
  t:add(F.aeth_msn, tvb(off + 1, 3))
  return "syndrome=" .. (aeth_syndromes[tvb(off, 1):uint()] or string.format("0x%02x", tvb(off, 1):uint()))
      .. " MSN=" .. tvb(off + 1, 3):uint()
end

local function dissect_seth(tvb, tree, off)
  local t = tree:add(F.seth, tvb(off, 28))
  check_prologue(t, tvb, off)
  t:add(F.sack_m, tvb(off + 1, 1))  -- m = 3 is reserved: shown as such, the SACK stays valid (F5)
  local pr = band(tvb(off + 1, 1):uint(), 0x02) ~= 0
  t:add(F.sack_pr, tvb(off + 1, 1))
  if pr then
    t:add(F.sack_probe_id, tvb(off + 2, 2))
  else
    t:add(F.sack_ackoff, tvb(off + 2, 2))
  end
  t:add(F.sack_entropy, tvb(off + 4, 4))
  if mrc.prefs.ext then
    t:add(F.sack_svc, tvb(off + 8, 2))
  else
    t:add(F.sack_spdcid, tvb(off + 8, 2))
    t:add(F.sack_dpdcid, tvb(off + 10, 2))
  end
  local cack = tvb(off + 13, 3):uint()
  t:add(F.sack_cack, tvb(off + 13, 3))
  if not pr then
    local trig = psn_add(cack, tvb(off + 2, 2):int())
    t:add(F.sack_psn, tvb(off + 2, 2), trig):set_generated()
  end
  add_cc_type_flags(t, "sack", tvb(off + 16, 1))
  t:add(F.sack_mpr, tvb(off + 17, 1))
  t:add(F.sack_offset, tvb(off + 18, 2))
  local base_psn = psn_add(cack, tvb(off + 18, 2):int())
  t:add(F.sack_base, tvb(off + 18, 2), base_psn):set_generated()
  local bm = t:add(F.sack_bitmap, tvb(off + 20, 8))
  local list, count = sack_received_list(base_psn, tvb(off + 20, 4):uint(), tvb(off + 24, 4):uint())
  bm:add(F.sack_count, tvb(off + 20, 8), count):set_generated()
  bm:add(F.sack_received, tvb(off + 20, 8), list):set_generated()

  local c = off + 28
  local cs = tree:add(F.cc, tvb(c, 8))
  cs:add(F.cc_ts, tvb(c, 2))
  cs:add(F.cc_ooo, tvb(c + 2, 2))
  cs:add(F.cc_rc, tvb(c + 4, 1))
  cs:add(F.cc_pen, tvb(c + 4, 1))
  cs:add(F.cc_bytes, tvb(c + 5, 3))
  return "cack=" .. cack .. " base=" .. base_psn .. " bitmap=0x" .. tostring(tvb(off + 20, 8):uint64():tohex())
end

local function dissect_neth(tvb, tree, off)
  local t = tree:add(F.neth, tvb(off, 20))
  check_prologue(t, tvb, off)
  local reason = tvb(off + 2, 1):uint()
  local ritem = t:add(F.nack_reason, tvb(off + 2, 1))
  local rname = nack_reasons[reason]
  if rname == nil then
    ritem:add_proto_expert_info(E.bad_field, string.format("unknown NACK reason 0x%02x", reason))
    rname = string.format("0x%02x", reason)
  end
  t:add(F.nack_vendor, tvb(off + 3, 1))
  t:add(F.nack_entropy, tvb(off + 4, 4))
  t:add(F.nack_psn, tvb(off + 13, 3))
  add_cc_type_flags(t, "nack", tvb(off + 16, 1))
  t:add(F.nack_ts, tvb(off + 18, 2))
  t:add_proto_expert_info(E.nack, "NACK " .. rname .. " PSN " .. tvb(off + 13, 3):uint())
  return "reason=" .. rname .. " nack_psn=" .. tvb(off + 13, 3):uint()
end

local function dissect_peth(tvb, tree, off)
  local t = tree:add(F.peth, tvb(off, 16))
  check_prologue(t, tvb, off)
  t:add(F.peth_vendor, tvb(off + 3, 1))
  t:add(F.peth_probe_id, tvb(off + 4, 2))
  t:add(F.peth_ts, tvb(off + 12, 2))
  t:add(F.peth_tsr, tvb(off + 14, 2))
  check_ftype(t, F.peth_ftype, tvb, off + 14)
  return "probe_id=" .. tvb(off + 4, 2):uint()
end

local function dissect_erth(tvb, tree, off)
  local t = tree:add(F.erth, tvb(off, 16))
  check_prologue(t, tvb, off)
  local op = band(tvb(off + 1, 1):uint(), 3)
  local oitem = t:add(F.erth_op, tvb(off + 1, 1))
  if op > 1 then oitem:add_proto_expert_info(E.bad_field, "op > 1") end
  t:add(F.erth_vendor, tvb(off + 3, 1))
  t:add(F.erth_mask, tvb(off + 4, 4))
  if mrc.prefs.ext then t:add(F.erth_entropy, tvb(off + 8, 4)) end
  t:add(F.erth_ts, tvb(off + 12, 2))
  t:add(F.erth_tsr, tvb(off + 14, 2))
  check_ftype(t, F.erth_ftype, tvb, off + 14)
  return "op=" .. ep_ops[op]
end

local function dissect_eeth(tvb, tree, off)
  local t = tree:add(F.eeth, tvb(off, 36))
  check_prologue(t, tvb, off)
  -- op: bits 1-0 (as in ERTH); when those are 0, bits 3-2 or 5-4 if exactly one of them holds 1 (F11).
  local b1 = tvb(off + 1, 1):uint()
  local op = band(b1, 3)
  if op == 0 then
    local a, b = band(rshift(b1, 2), 3), band(rshift(b1, 4), 3)
    if a == 1 and b == 0 then op = 1 elseif b == 1 and a == 0 then op = 1 end
  end
  local oitem = t:add(F.eeth_op, tvb(off + 1, 1), op)
  if op > 1 then oitem:add_proto_expert_info(E.bad_field, "op > 1") end
  if mrc.prefs.ext then
    t:add(F.eeth_svc_valid, tvb(off + 2, 1))
    t:add(F.eeth_mask_valid, tvb(off + 2, 1))
    t:add(F.eeth_vendor, tvb(off + 3, 1))
    t:add(F.eeth_entropy, tvb(off + 4, 4))
    t:add(F.eeth_svc, tvb(off + 8, 4))
    t:add(F.eeth_mask, tvb(off + 12, 4))
  end
  t:add(F.eeth_ts, tvb(off + 28, 2))  -- bytes 30-35 reserved (F1)
  return "op=" .. ep_ops[op]
end

-------------------------------------------------------------------------------------------------
-- Main dissector

local original_handle = nil  -- the udp.port 4791 dissector we replaced (RoCEv2)

local function is_mrc_range(op) return op >= 0xC0 and op <= 0xDF end

function mrc.dissector(tvb, pinfo, tree)
  local len = tvb:len()
  if len < 1 then return 0 end
  local opcode = tvb(0, 1):uint()
  if not is_mrc_range(opcode) then
    if original_handle ~= nil then return original_handle:call(tvb, pinfo, tree) end
    return 0
  end

  pinfo.cols.protocol = "MRC"
  local root = tree:add(mrc, tvb(), "Multipath Reliable Connection")
  local opname = opcode_names[opcode] or string.format("0x%02x", opcode)

  if len < 12 then
    root:add_proto_expert_info(E.truncated, "shorter than the 12-byte BTH")
    pinfo.cols.info = opname .. " [truncated]"
    return len
  end

  -- BTH
  local bth = root:add(F.bth, tvb(0, 12))
  bth:add(F.opcode, tvb(0, 1))
  bth:add(F.se, tvb(1, 1))
  bth:add(F.m, tvb(1, 1))
  bth:add(F.padcnt, tvb(1, 1))
  local tver_item = bth:add(F.tver, tvb(1, 1))
  if band(tvb(1, 1):uint(), 0x0F) ~= 0 then tver_item:add_proto_expert_info(E.bad_tver) end
  bth:add(F.pkey, tvb(2, 2))
  bth:add(F.resv8, tvb(4, 1))
  bth:add(F.qpn, tvb(5, 3))
  bth:add(F.a, tvb(8, 1))
  bth:add(F.rtx, tvb(8, 1))
  local ts = band(tvb(8, 1):uint(), 0x10) ~= 0
  local ts_item = bth:add(F.ts, tvb(8, 1))
  bth:add(F.psn, tvb(9, 3))
  local psn = tvb(9, 3):uint()
  local qpn = tvb(5, 3):uint()
  local pad = band(rshift(tvb(1, 1):uint(), 4), 3)

  local hsize = header_size[opcode]
  if hsize == nil then
    root:add_proto_expert_info(E.unknown_op)
    pinfo.cols.info = string.format("unknown opcode 0x%02x QP=0x%06x PSN=%d", opcode, qpn, psn)
    return len
  end
  local data = opcode <= OP.WRITE_ONLY_IMM
  if ts then
    -- No source puts a TSETH after a control header: TS there is shown and ignored.
    if data then hsize = hsize + 4 else ts_item:append_text(" (ignored on a control packet)") end
  end
  if opcode == OP.EP_REQUEST then bth:add(F.request_id, tvb(10, 2)):set_generated() end

  local info = string.format("%s QP=0x%06x PSN=%d", opname, qpn, psn)
  if len < hsize then
    root:add_proto_expert_info(E.truncated, string.format("%d bytes, header stack needs %d", len, hsize))
    pinfo.cols.info = info .. " [truncated]"
    return len
  end

  local detail = nil
  if data then
    dissect_data_ext(tvb, root, opcode, ts and data, 12)
  elseif opcode == OP.ACK then
    detail = dissect_aeth(tvb, root, 12)
  elseif opcode == OP.SACK then
    detail = dissect_seth(tvb, root, 12)
  elseif opcode == OP.NACK then
    detail = dissect_neth(tvb, root, 12)
  elseif opcode == OP.PROBE then
    detail = dissect_peth(tvb, root, 12)
  elseif opcode == OP.EP_REQUEST then
    detail = dissect_erth(tvb, root, 12)
  elseif opcode == OP.EP_RESPONSE then
    detail = dissect_eeth(tvb, root, 12)
  end

  -- Payload, pad, ICRC. A packet that ends right after its header stack is a trimmed packet (W15).
  if len == hsize then
    root:add(F.trimmed, tvb(0, 0), true):set_generated()
    root:add_proto_expert_info(E.trimmed)
    info = info .. " [trimmed]"
  elseif len < hsize + 4 then
    root:add_proto_expert_info(E.truncated, "no room for the ICRC")
    info = info .. " [truncated]"
  else
    local area = len - hsize - 4  -- payload + pad
    if not data then
      if area ~= 0 then root:add_proto_expert_info(E.bad_pad, string.format("%d bytes after the control header", area)) end
      if pad ~= 0 then root:add_proto_expert_info(E.bad_pad, "PadCnt on a control packet") end
    else
      if area % 4 ~= 0 or pad > area then
        root:add_proto_expert_info(E.bad_pad, string.format("payload+pad area %d, PadCnt %d", area, pad))
      else
        local plen = area - pad
        root:add(F.payload_len, tvb(hsize, area), plen):set_generated()
        if plen > 0 then root:add(F.payload, tvb(hsize, plen)) end
        if pad > 0 then
          local pitem = root:add(F.pad, tvb(hsize + plen, pad))
          for i = 0, pad - 1 do
            if tvb(hsize + plen + i, 1):uint() ~= 0 then pitem:add_proto_expert_info(E.bad_pad, "non-zero pad") break end
          end
        end
        info = info .. " len=" .. plen
      end
    end
    local icrc_item = root:add_le(F.icrc, tvb(len - 4, 4))
    if mrc.prefs.verify_icrc then
      -- RoCEv2's (what a NIC checks, W22) when the frame has IP/UDP headers; else, or if it does not
      -- match, the one without them (W16: simulator captures), marked as such.
      local found = tvb(len - 4, 4):le_uint()
      local prefix = masked_ip_udp()
      local no_ip = mrc_icrc(tvb, len - 4, "")
      local computed = no_ip
      local rocev2_good = nil
      if prefix ~= nil then
        computed = mrc_icrc(tvb, len - 4, prefix)
        rocev2_good = computed == found
      end
      local good = computed == found or no_ip == found
      icrc_item:add(F.icrc_computed, tvb(len - 4, 4), computed):set_generated()
      icrc_item:add(F.icrc_good, tvb(len - 4, 4), good):set_generated()
      if rocev2_good ~= nil then icrc_item:add(F.icrc_rocev2, tvb(len - 4, 4), rocev2_good):set_generated() end
      icrc_item:add(F.icrc_no_ip, tvb(len - 4, 4), no_ip == found):set_generated()
      if not good then
        icrc_item:add_proto_expert_info(E.bad_icrc, string.format("ICRC mismatch, computed 0x%08x", computed))
        info = info .. " [bad ICRC]"
      elseif rocev2_good == false then
        icrc_item:add_proto_expert_info(E.icrc_no_ip)
      end
    end
  end
  if detail ~= nil then info = info .. " " .. detail end
  pinfo.cols.info = info
  root:append_text(", " .. opname .. ", QP 0x" .. string.format("%06x", qpn) .. ", PSN " .. psn)
  return len
end

-------------------------------------------------------------------------------------------------
-- Registration on UDP 4791 and 4971 (+ the "UDP port" preference), keeping the RoCEv2 handle for
-- non-MRC opcodes

local udp_port = DissectorTable.get("udp.port")
original_handle = udp_port:get_dissector(4791)
if original_handle == nil then
  -- Should not happen with a stock build; fall back to the registered name if there is one.
  local ok, h = pcall(Dissector.get, "infiniband")
  if ok then original_handle = h end
end
udp_port:add(4791, mrc)
udp_port:add(4971, mrc)

local extra_port = nil
local function apply_port_pref()
  local p = mrc.prefs.udp_port
  if extra_port == p then return end
  if extra_port ~= nil and extra_port ~= 4791 and extra_port ~= 4971 then udp_port:remove(extra_port, mrc) end
  if p ~= nil and p > 0 and p < 65536 then udp_port:add(p, mrc) end
  extra_port = p
end
mrc.prefs_changed = apply_port_pref
apply_port_pref()
