#include "io/metrics.hpp"

#include <cstdio>
#include <map>

#include "engine/qp.hpp"

namespace mrc::io {
namespace {

// X(name, help) for every plain counter of engine::QpCounters.
#define MRC_QP_COUNTERS(X)                                                                \
  X(tx_data, "data packets sent (first transmissions)")                                   \
  X(tx_rtx, "data packets retransmitted")                                                 \
  X(tx_sack, "SACKs sent")                                                                \
  X(tx_nack, "NACKs sent")                                                                \
  X(tx_probe, "probes sent")                                                              \
  X(tx_ack, "transport ACK/NAKs sent")                                                    \
  X(rx_data, "data packets received")                                                     \
  X(rx_dup, "duplicate data packets received")                                            \
  X(rx_sack, "SACKs received")                                                            \
  X(rx_nack, "NACKs received")                                                            \
  X(rx_trimmed, "trimmed data packets received")                                          \
  X(rx_probe, "probes received")                                                          \
  X(rtx_nack, "retransmissions caused by a NACK")                                         \
  X(rtx_loss, "retransmissions caused by inferred loss")                                  \
  X(rtx_timeout, "retransmissions caused by a timeout")                                   \
  X(rtx_port, "retransmissions caused by a plane going down")                             \
  X(rtx_spurious, "retransmissions that arrived as duplicates")                           \
  X(tx_dup, "second copies of retransmissions after a plane failed (D56)")                \
  X(rx_refused, "packets refused: bad rkey, bounds, PSN, peer or pkey")                   \
  X(rx_fatal_nak_held, "fatal NAKs held until a retransmission confirms them")            \
  X(rx_fatal_nak_dismissed, "fatal NAKs dismissed (packet acknowledged, or unconfirmed)") \
  X(ctrl_dropped, "control packets dropped: the QP's control queue was full")             \
  X(ev_transitions, "EV state transitions")                                               \
  X(timeouts, "retransmission timeouts")                                                  \
  X(tx_encode_errors, "packets the codec refused (must stay 0)")                          \
  X(bytes_acked, "payload bytes acknowledged")                                            \
  X(bytes_placed, "payload bytes placed in memory")

#define MRC_ENDPOINT_COUNTERS(X)                                                      \
  X(rx_bad_packet, "packets that failed to decode or their ICRC")                     \
  X(rx_unknown_qp, "packets for a QP that does not exist or is not connected")        \
  X(rx_wrong_peer, "packets for a QP from an address other than its peer's")          \
  X(rx_bad_pkey, "packets with a partition key that does not match")                  \
  X(tx_encode_errors, "packets the codec refused (must stay 0)")                      \
  X(rx_auth_failed, "packets refused for a missing or wrong MAC")                     \
  X(rx_ep_refused, "endpoint packets refused (unknown source, bad port mask, MAC)")   \
  X(port_status_corrected, "port-status updates overridden by the peer's own answer") \
  X(ep_tx_dropped, "endpoint packets not queued: the endpoint queue was full")        \
  X(events_dropped, "events dropped because nobody drained the queue")

#define MRC_PLANE_COUNTERS(X)                                 \
  X(tx_packets, "UDP datagrams sent")                         \
  X(tx_bytes, "UDP payload bytes sent")                       \
  X(tx_batches, "transmit batches flushed")                   \
  X(tx_syscalls, "sendmmsg calls")                            \
  X(tx_gso_messages, "GSO sends (several datagrams each)")    \
  X(tx_dropped, "datagrams the kernel refused")               \
  X(tx_no_route, "packets for an unknown peer")               \
  X(rx_packets, "UDP datagrams received")                     \
  X(rx_bytes, "UDP payload bytes received")                   \
  X(rx_syscalls, "recvmmsg calls")                            \
  X(rx_gro_packets, "datagrams received inside a GRO batch")  \
  X(rx_ecn_ce, "datagrams received with ECN CE")              \
  X(rx_trimmed, "datagrams received with a trimmed DSCP")     \
  X(rx_unknown_source, "datagrams from an unknown source")    \
  X(rx_truncated, "datagrams larger than the receive buffer") \
  X(link_down_events, "plane link went down (port set down)") \
  X(link_up_events, "plane link came back (port set up)")

#define MRC_IMPAIR_COUNTERS(X)              \
  X(seen, "packets seen by the impairment") \
  X(dropped, "packets dropped")             \
  X(duplicated, "packets duplicated")       \
  X(reordered, "packets held back")         \
  X(trimmed, "packets trimmed")             \
  X(delayed, "packets delayed")             \
  X(hold_overflow, "hold pool overflows")   \
  X(delivered, "packets delivered")

const char* ev_state_name(engine::EvState s) {
  return engine::to_string(s);
}

struct Prom {
  std::string out;
  std::string labels;
  void header(const std::string& name, const char* help, const char* type) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const std::string& name, const std::string& lbl, std::uint64_t v) {
    std::string all = labels;
    if (!lbl.empty()) all += (all.empty() ? "" : ",") + lbl;
    out += name;
    if (!all.empty()) out += "{" + all + "}";
    out += " " + std::to_string(v) + "\n";
  }
};

}  // namespace

nlohmann::json to_json(const engine::QpCounters& c) {
  nlohmann::json j;
#define X(n, h) j[#n] = c.n;
  MRC_QP_COUNTERS(X)
#undef X
  nlohmann::json nr = nlohmann::json::object();
  for (std::size_t i = 0; i < std::size(c.nack_sent_by_reason); ++i)
    if (c.nack_sent_by_reason[i] != 0) nr[std::to_string(i)] = c.nack_sent_by_reason[i];
  j["nack_sent_by_reason"] = nr;
  return j;
}

nlohmann::json metrics_json(const UdpEndpoint& ep) {
  nlohmann::json j;
  const engine::Endpoint& e = ep.engine();
  const engine::EndpointCounters& ec = e.counters();
  nlohmann::json epj;
#define X(n, h) epj[#n] = ec.n;
  MRC_ENDPOINT_COUNTERS(X)
#undef X
  epj["commands_refused"] = ep.commands_refused();
  j["endpoint"] = epj;
  nlohmann::json planes = nlohmann::json::array();
  for (std::size_t i = 0; i < ep.plane_counters().size(); ++i) {
    const PlaneCounters& pc = ep.plane_counters()[i];
    nlohmann::json p;
    p["plane"] = i;
    p["address"] = ep.config().planes[i].str();
#define X(n, h) p[#n] = pc.n;
    MRC_PLANE_COUNTERS(X)
#undef X
    p["send_sockets"] = pc.send_sockets;
    planes.push_back(p);
  }
  j["planes"] = planes;
  nlohmann::json evtx = nlohmann::json::array();
  for (const EvTxCounter& c : ep.ev_tx_counters())
    evtx.push_back({{"plane", c.plane}, {"sport", c.sport}, {"packets", c.packets}});
  j["ev_tx"] = evtx;
  nlohmann::json imp;
  const ImpairStats& is = ep.impair_stats();
#define X(n, h) imp[#n] = is.n;
  MRC_IMPAIR_COUNTERS(X)
#undef X
  imp["config"] = to_string(ep.config().impair);
  j["impair"] = imp;
  nlohmann::json qps = nlohmann::json::array();
  for (const std::uint32_t qpn : e.qpns()) {
    const engine::Qp* q = e.qp(qpn);
    if (q == nullptr) continue;
    nlohmann::json jq;
    jq["qpn"] = qpn;
    jq["state"] = engine::to_string(q->state());
    jq["counters"] = to_json(q->counters());
    const engine::EvManager& m = q->evs();
    nlohmann::json ev;
    ev["transitions"] = m.stats().transitions;
    ev["promotions"] = m.stats().promotions;
    ev["floor_hits"] = m.stats().floor_hits;
    ev["probes"] = m.stats().probes;
    nlohmann::json counts;
    for (const auto s : {engine::EvState::kGood, engine::EvState::kSkip, engine::EvState::kAssumedBad,
                         engine::EvState::kDenied})
      counts[ev_state_name(s)] = m.count(s);
    ev["count_by_state"] = counts;
    nlohmann::json list = nlohmann::json::array();
    for (std::uint16_t s = 0; s < m.size(); ++s)
      list.push_back({{"value", m.ev(s).value},
                      {"plane", m.ev(s).port},
                      {"state", ev_state_name(m.state(s))},
                      {"active", m.is_active(s)}});
    ev["evs"] = list;
    jq["ev"] = ev;
    qps.push_back(jq);
  }
  j["qps"] = qps;
  return j;
}

std::string metrics_prometheus(const UdpEndpoint& ep, const std::string& labels) {
  Prom p;
  p.labels = labels;
  const engine::Endpoint& e = ep.engine();
  const engine::EndpointCounters& ec = e.counters();
#define X(n, h)                                        \
  p.header("mrc_endpoint_" #n "_total", h, "counter"); \
  p.sample("mrc_endpoint_" #n "_total", "", ec.n);
  MRC_ENDPOINT_COUNTERS(X)
#undef X
  const auto& planes = ep.plane_counters();
#define X(n, h)                                                           \
  {                                                                       \
    const std::string name = "mrc_plane_" #n "_total";                    \
    p.header(name, h, "counter");                                         \
    for (std::size_t i = 0; i < planes.size(); ++i)                       \
      p.sample(name, "plane=\"" + std::to_string(i) + "\"", planes[i].n); \
  }
  MRC_PLANE_COUNTERS(X)
#undef X
  p.header("mrc_ev_tx_packets_total", "packets sent per EV (plane, UDP source port)", "counter");
  for (const EvTxCounter& c : ep.ev_tx_counters())
    p.sample("mrc_ev_tx_packets_total",
             "plane=\"" + std::to_string(c.plane) + "\",sport=\"" + std::to_string(c.sport) + "\"",
             c.packets);
  const ImpairStats& is = ep.impair_stats();
#define X(n, h)                                      \
  p.header("mrc_impair_" #n "_total", h, "counter"); \
  p.sample("mrc_impair_" #n "_total", "", is.n);
  MRC_IMPAIR_COUNTERS(X)
#undef X
  const std::vector<std::uint32_t> qpns = e.qpns();
#define X(n, h)                                                                 \
  {                                                                             \
    const std::string name = "mrc_qp_" #n "_total";                             \
    p.header(name, h, "counter");                                               \
    for (const std::uint32_t qpn : qpns)                                        \
      if (const engine::Qp* q = e.qp(qpn))                                      \
        p.sample(name, "qpn=\"" + std::to_string(qpn) + "\"", q->counters().n); \
  }
  MRC_QP_COUNTERS(X)
#undef X
  p.header("mrc_qp_ev_count", "EVs of a QP by state", "gauge");
  for (const std::uint32_t qpn : qpns)
    if (const engine::Qp* q = e.qp(qpn))
      for (const auto s : {engine::EvState::kGood, engine::EvState::kSkip, engine::EvState::kAssumedBad,
                           engine::EvState::kDenied})
        p.sample("mrc_qp_ev_count", "qpn=\"" + std::to_string(qpn) + "\",state=\"" + ev_state_name(s) + "\"",
                 q->evs().count(s));
  p.header("mrc_ev_state", "state of each EV (1 for the current state)", "gauge");
  for (const std::uint32_t qpn : qpns) {
    const engine::Qp* q = e.qp(qpn);
    if (q == nullptr) continue;
    const engine::EvManager& m = q->evs();
    for (std::uint16_t s = 0; s < m.size(); ++s)
      p.sample("mrc_ev_state",
               "qpn=\"" + std::to_string(qpn) + "\",ev=\"" + std::to_string(m.ev(s).value) + "\",plane=\"" +
                   std::to_string(m.ev(s).port) + "\",state=\"" + ev_state_name(m.state(s)) + "\",active=\"" +
                   (m.is_active(s) ? "1" : "0") + "\"",
               1);
  }
  p.header("mrc_qp_evm_transitions_total", "EV manager transitions", "counter");
  for (const std::uint32_t qpn : qpns)
    if (const engine::Qp* q = e.qp(qpn))
      p.sample("mrc_qp_evm_transitions_total", "qpn=\"" + std::to_string(qpn) + "\"",
               q->evs().stats().transitions);
  return p.out;
}

}  // namespace mrc::io
