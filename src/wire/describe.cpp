// describe(): a decoded packet's fields by name (see describe.hpp).
#include "wire/describe.hpp"

namespace mrc::wire {
namespace {

struct Out {
  std::vector<FieldValue>& v;
  const char* header;
  void u(const char* name, std::uint64_t x) {
    v.push_back({header, name, FieldValue::Kind::kUnsigned, x, 0, false});
  }
  void s(const char* name, std::int64_t x) {
    v.push_back({header, name, FieldValue::Kind::kSigned, 0, x, false});
  }
  void b(const char* name, bool x) { v.push_back({header, name, FieldValue::Kind::kBool, 0, 0, x}); }
};

}  // namespace

const char* opcode_name(Opcode op) {
  switch (op) {
    case Opcode::kWriteFirst:
      return "WRITE_FIRST";
    case Opcode::kWriteMiddle:
      return "WRITE_MIDDLE";
    case Opcode::kWriteLast:
      return "WRITE_LAST";
    case Opcode::kWriteLastImm:
      return "WRITE_LAST_IMM";
    case Opcode::kWriteOnly:
      return "WRITE_ONLY";
    case Opcode::kWriteOnlyImm:
      return "WRITE_ONLY_IMM";
    case Opcode::kAck:
      return "ACK";
    case Opcode::kEndpointRequest:
      return "EP_REQUEST";
    case Opcode::kEndpointResponse:
      return "EP_RESPONSE";
    case Opcode::kSack:
      return "SACK";
    case Opcode::kNack:
      return "NACK";
    case Opcode::kProbe:
      return "PROBE";
  }
  return "UNKNOWN";
}

std::vector<FieldValue> describe(const Packet& p, bool ext) {
  std::vector<FieldValue> v;
  v.reserve(40);
  const Opcode op = p.bth.opcode;
  Out bth{v, "bth"};
  bth.u("opcode", static_cast<std::uint8_t>(op));
  bth.b("m", p.bth.m);
  bth.b("se", p.bth.se);
  bth.u("pad_cnt", p.bth.pad_cnt);
  bth.u("tver", p.bth.tver);
  bth.u("pkey", p.bth.pkey);
  bth.u("dest_qp", p.bth.dest_qp);
  bth.b("ack_req", p.bth.ack_req);
  bth.b("rtx", p.bth.rtx);
  bth.b("ts", p.bth.ts);
  bth.u("psn", p.bth.psn);
  if (is_data(op)) {
    Out m{v, "meth"};
    m.u("rqmsn", p.meth.rqmsn);
    m.u("msn", p.meth.msn);
    if (p.has_tseth) {
      Out t{v, "tseth"};
      t.u("tx_timestamp", p.tseth.tx_timestamp);
      t.b("tsr", p.tseth.tsr);
      t.u("ftype", p.tseth.ftype);
    }
    Out r{v, "reth"};
    r.u("va", p.reth.va);
    r.u("rkey", p.reth.rkey);
    r.u("dma_len", p.reth.dma_len);
    if (has_imm(op)) Out{v, "immdt"}.u("imm", p.imm);
    Out{v, "payload"}.u("len", p.payload.size());
    return v;
  }
  switch (op) {
    case Opcode::kAck: {
      Out a{v, "aeth"};
      a.u("syndrome", p.aeth.syndrome);
      a.u("msn", p.aeth.msn);
      break;
    }
    case Opcode::kSack: {
      const Seth& s = p.seth;
      Out o{v, "seth"};
      o.u("m", static_cast<std::uint8_t>(s.m));
      o.b("pr", s.pr);
      if (s.pr)
        o.u("probe_id", s.probe_id);
      else
        o.s("ack_psn_offset", s.ack_psn_offset);
      o.u("entropy", s.entropy);
      if (ext) o.u("svc_time", s.svc_time);
      o.u("cack_psn", s.cack_psn);
      o.u("cc_type", s.cc_type);
      if (ext) o.u("cc_flags", s.cc_flags);
      o.u("mpr", s.mpr);
      o.s("sack_offset", s.sack_offset);
      o.u("sack_bitmap", s.sack_bitmap);
      Out c{v, "cc_state"};
      c.u("tx_timestamp", s.cc.tx_timestamp);
      c.u("ooo_count", s.cc.ooo_count);
      c.b("restore_cwnd", s.cc.restore_cwnd);
      c.u("rcv_cwnd_pen", s.cc.rcv_cwnd_pen);
      c.u("rcvd_bytes", s.cc.rcvd_bytes);
      break;
    }
    case Opcode::kNack: {
      const Neth& n = p.neth;
      Out o{v, "neth"};
      o.u("reason", static_cast<std::uint8_t>(n.reason));
      o.u("vendor_info", n.vendor_info);
      o.u("entropy", n.entropy);
      o.u("nack_psn", n.nack_psn);
      o.u("cc_type", n.cc_type);
      if (ext) o.u("cc_flags", n.cc_flags);
      o.u("tx_timestamp", n.tx_timestamp);
      break;
    }
    case Opcode::kProbe: {
      Out o{v, "peth"};
      o.u("vendor_info", p.peth.vendor_info);
      o.u("probe_id", p.peth.probe_id);
      o.u("tx_timestamp", p.peth.tx_timestamp);
      o.b("tsr", p.peth.tsr);
      o.u("ftype", p.peth.ftype);
      break;
    }
    case Opcode::kEndpointRequest: {
      Out o{v, "erth"};
      o.u("op", static_cast<std::uint8_t>(p.erth.op));
      o.u("vendor_info", p.erth.vendor_info);
      o.u("port_status_mask", p.erth.port_status_mask);
      if (ext) o.u("entropy", p.erth.entropy);
      o.u("tx_timestamp", p.erth.tx_timestamp);
      o.b("tsr", p.erth.tsr);
      o.u("ftype", p.erth.ftype);
      break;
    }
    case Opcode::kEndpointResponse: {
      const Eeth& e = p.eeth;
      Out o{v, "eeth"};
      o.u("op", static_cast<std::uint8_t>(e.op));
      if (ext) {
        o.b("svc_time_valid", e.svc_time_valid);
        o.b("port_status_valid", e.port_status_valid);
        o.u("vendor_info", e.vendor_info);
        o.u("entropy", e.entropy);
        o.u("svc_time_ns", e.svc_time_ns);
        o.u("port_status_mask", e.port_status_mask);
      }
      o.u("tx_timestamp", e.tx_timestamp);
      break;
    }
    default:
      break;
  }
  return v;
}

}  // namespace mrc::wire
