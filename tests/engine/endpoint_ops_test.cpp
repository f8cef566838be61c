// Endpoint operations over the in-memory network (docs/protocol.md §4.2, §4.5, §4.10): EV probes and
// their timeouts, port-status updates, EV reflection in feedback, and dynamic MPR.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "engine/ev_sets.hpp"
#include "harness.hpp"
#include "packet_util.hpp"

namespace mrc::test {
namespace {

using engine::EventType;

std::vector<engine::Event> events_of(const std::vector<engine::Event>& all, EventType type) {
  std::vector<engine::Event> out;
  for (const auto& e : all)
    if (e.type == type) out.push_back(e);
  return out;
}

/// Runs until `a` has an event of `type` (or the limit).
bool run_until_a_event(Pair& p, EventType type, Time limit) {
  return p.net().run_while(
      [&] {
        p.drain();
        return events_of(p.a_events(), type).empty();
      },
      limit);
}

TEST(EndpointOps, EvProbeIsAnsweredWithAboutTheBaseRtt) {
  PairOptions o;
  Pair p(o);
  const engine::Ev ev{5, 1};  // plane 1, path 5
  ASSERT_EQ(p.a().send_ev_probe(p.node_b(), ev, 7, 100_us, p.net().now()), 0);
  p.net().kick(p.node_a());
  ASSERT_TRUE(run_until_a_event(p, EventType::kEvProbeResponse, 1_ms));
  const auto rsp = events_of(p.a_events(), EventType::kEvProbeResponse);
  ASSERT_EQ(rsp.size(), 1u);
  const engine::Event& e = rsp[0];
  EXPECT_EQ(e.req_id, 7);
  EXPECT_EQ(e.peer, p.node_b());
  EXPECT_EQ(e.ev, ev);
  EXPECT_TRUE(e.adj_svc_time);
  EXPECT_EQ(e.port_mask, 0xFu);  // the responder's usable ports
  const Duration base = p.net().base_rtt();
  // Two small packets: the propagation delays plus a few ns of serialisation, at most the base RTT
  // (which budgets a full MTU packet one way).
  EXPECT_GE(e.rtt_ns, 2 * o.path.delay);
  EXPECT_LE(e.rtt_ns, base);
  EXPECT_GT(static_cast<double>(e.rtt_ns), 0.9 * static_cast<double>(base));
  // The answered probe is gone: no timeout follows.
  p.net().run_until(300_us);
  p.drain();
  EXPECT_TRUE(events_of(p.a_events(), EventType::kEvProbeTimeout).empty());
  // The responder reports nothing (probes are answered by the endpoint, not an application).
  EXPECT_TRUE(events_of(p.b_events(), EventType::kEvProbeResponse).empty());
}

TEST(EndpointOps, EvProbeIsAnsweredOnTheEvItArrivedOn) {
  // The response reflects the request's EV so the probe measures that path both ways. Path 0 of
  // plane 1 is dead; the probed EV (path 5) is healthy, so the probe must succeed.
  PairOptions o;
  Pair p(o);
  p.net().kill_path(1, 0, 0);
  std::vector<sim::PacketRecord> recs;
  p.net().set_observer([&](const sim::PacketRecord& r) { recs.push_back(r); });
  const engine::Ev ev{5, 1};
  ASSERT_EQ(p.a().send_ev_probe(p.node_b(), ev, 1, 50_us, 0), 0);
  p.net().kick(p.node_a());
  p.net().run_until(100_us);
  p.drain();
  for (const auto& r : recs) {
    EXPECT_EQ(r.plane, 1);
    EXPECT_EQ(r.ev.value, ev.value) << (r.src == p.node_a() ? "request" : "response") << " went on path "
                                    << r.path;
  }
  EXPECT_EQ(events_of(p.a_events(), EventType::kEvProbeResponse).size(), 1u);
  EXPECT_TRUE(events_of(p.a_events(), EventType::kEvProbeTimeout).empty());
}

TEST(EndpointOps, EvProbeOnADeadPathTimesOut) {
  PairOptions o;
  Pair p(o);
  const engine::Ev ev{5, 1};
  p.net().kill_path(1, p.net().path_index(ev), 0);
  const Time t0 = 3_us;
  p.net().run_until(t0);
  ASSERT_EQ(p.a().send_ev_probe(p.node_b(), ev, 9, 20_us, t0), 0);
  p.net().kick(p.node_a());
  p.net().run_until(100_us);
  p.drain();
  EXPECT_TRUE(events_of(p.a_events(), EventType::kEvProbeResponse).empty());
  const auto to = events_of(p.a_events(), EventType::kEvProbeTimeout);
  ASSERT_EQ(to.size(), 1u);
  EXPECT_EQ(to[0].req_id, 9);
  EXPECT_EQ(to[0].peer, p.node_b());
  EXPECT_EQ(to[0].ev, ev);
  EXPECT_GE(to[0].time, t0 + 20_us);
  EXPECT_LE(to[0].time, t0 + 21_us);
  EXPECT_EQ(p.net().stats().drops_by(sim::DropCause::kPathDead), 1u);
  // After the timeout the id is free again.
  EXPECT_EQ(p.a().send_ev_probe(p.node_b(), ev, 9, 20_us, p.net().now()), 0);
}

TEST(EndpointOps, DuplicateOutstandingReqIdIsEbusy) {
  PairOptions o;
  Pair p(o);
  const engine::Ev ev{2, 0};
  ASSERT_EQ(p.a().send_ev_probe(p.node_b(), ev, 7, 50_us, 0), 0);
  EXPECT_EQ(p.a().send_ev_probe(p.node_b(), ev, 7, 50_us, 0), EBUSY);
  EXPECT_EQ(p.a().send_ev_probe(p.node_b(), engine::Ev{3, 2}, 7, 50_us, 0), EBUSY);  // per peer, not per EV
  EXPECT_EQ(p.a().send_ev_probe(p.node_b(), ev, 8, 50_us, 0), 0);
  EXPECT_EQ(p.a().send_ev_probe(p.node_a(), ev, 7, 50_us, 0), 0);  // another peer (ourselves)
  EXPECT_EQ(p.a().send_ev_probe(p.node_b(), engine::Ev{1, 4}, 10, 50_us, 0), EINVAL);  // no port 4
  p.net().kick(p.node_a());
  ASSERT_TRUE(p.net().run_while(
      [&] {
        p.drain();
        return events_of(p.a_events(), EventType::kEvProbeResponse).size() < 3;
      },
      1_ms));
  std::vector<std::uint16_t> ids;
  for (const auto& e : events_of(p.a_events(), EventType::kEvProbeResponse)) ids.push_back(e.req_id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::uint16_t>{7, 7, 8}));
  // Answered: the id may be used again.
  EXPECT_EQ(p.a().send_ev_probe(p.node_b(), ev, 7, 50_us, p.net().now()), 0);
}

TEST(EndpointOps, SacksAndNacksReflectTheEvOfTheTriggeringPacket) {
  // Engine side of EV feedback: whatever EV the driver reports in RxMeta comes back in the SACK.
  Pair p(PairOptions{});
  std::vector<std::uint8_t> pay(256, 0x42);
  wire::Packet k;
  k.bth.opcode = wire::Opcode::kWriteOnly;
  k.bth.dest_qp = p.qpn_b();
  k.bth.psn = p.psn_ab();
  k.bth.ack_req = true;
  k.reth.va = reinterpret_cast<std::uintptr_t>(p.dst().data());
  k.reth.rkey = p.mr_b().rkey;
  k.reth.dma_len = 256;
  k.payload = pay;
  engine::RxMeta m = rx_meta(p.node_a(), 2, 0xBEEF);
  m.ecn_ce = true;
  p.b().receive(encode_packet(k), m, 0);
  const auto out = pull_all(p.b(), 0, 0xF);
  ASSERT_EQ(out.size(), 1u);
  wire::Packet s;
  ASSERT_EQ(out[0].decode(s), wire::Error::kOk);
  ASSERT_EQ(s.bth.opcode, wire::Opcode::kSack);
  EXPECT_EQ(s.seth.entropy, 0xBEEFu);
  EXPECT_EQ(s.seth.m, wire::SackMode::kSkipOnce);
  EXPECT_EQ(out[0].port, 2);
}

/// a's first data frames for a fresh one-packet write, delivered nowhere yet.
std::vector<Frame> first_data_frames(Pair& p, std::uint32_t npkts) {
  engine::SendWr wr;
  wr.wr_id = 1;
  wr.local_addr = reinterpret_cast<std::uintptr_t>(p.src().data());
  wr.length = npkts * p.options().pmtu;
  wr.lkey = p.a().memory().register_region(p.src().data(), p.src().size(), engine::access::kAll)->lkey;
  wr.remote_addr = reinterpret_cast<std::uintptr_t>(p.dst().data());
  wr.rkey = p.mr_b().rkey;
  EXPECT_EQ(p.a().post_send(p.qpn_a(), wr, 0), 0);
  return pull_all(p.a(), 0, 0xF, npkts);
}

TEST(EndpointOps, EcnEchoSkipsTheEvWhenTheDriverReportsTheEv) {
  // The engine half of ECN load balancing, driven by hand with RxMeta::ev filled in.
  Pair p(PairOptions{});
  const auto frames = first_data_frames(p, 4);
  ASSERT_EQ(frames.size(), 4u);
  const Frame& marked = frames[1];
  for (const Frame& f : frames) {
    engine::RxMeta m = rx_meta(p.node_a(), f.port, f.ev.value);
    m.ecn_ce = &f == &marked;
    p.b().receive(f.bytes, m, 2000);
  }
  for (const Frame& f : pull_all(p.b(), 2000, 0xF)) deliver(p.a(), f, p.node_b(), 4000);
  p.drain();
  std::vector<engine::Event> skips;
  for (const auto& e : p.a_events())
    if (e.type == EventType::kEvState && e.to == engine::EvState::kSkip) skips.push_back(e);
  ASSERT_EQ(skips.size(), 1u);
  EXPECT_EQ(skips[0].ev, marked.ev);
  EXPECT_EQ(skips[0].cause, engine::EvCause::kEcnEcho);
  EXPECT_EQ(skips[0].from, engine::EvState::kGood);
}

TEST(EndpointOps, AlwaysSkipSackRetiresTheReflectedEv) {
  Pair p(PairOptions{});
  const auto frames = first_data_frames(p, 2);
  ASSERT_EQ(frames.size(), 2u);
  const Frame& f = frames[0];
  wire::Packet k;
  k.bth.opcode = wire::Opcode::kSack;
  k.bth.dest_qp = p.qpn_a();
  k.bth.psn = f.psn;
  k.seth.m = wire::SackMode::kAlwaysSkip;
  k.seth.cack_psn = f.psn;  // acknowledges the trigger itself
  k.seth.ack_psn_offset = 0;
  k.seth.entropy = f.ev.value;
  k.seth.sack_offset = 1;
  p.a().receive(encode_packet(k), rx_meta(p.node_b(), f.port, 0), 3000);
  p.drain();
  std::vector<engine::Event> bad;
  for (const auto& e : p.a_events())
    if (e.type == EventType::kEvState && e.to == engine::EvState::kAssumedBad) bad.push_back(e);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].ev, f.ev);
  EXPECT_EQ(bad[0].cause, engine::EvCause::kAlwaysSkip);
  EXPECT_EQ(p.qpa().outstanding_psns(), 1u);  // the SACK acknowledged the first packet
}

TEST(EndpointOps, EcnMarksOnOnePathMakeItsEvsSkip) {
  // ECN is a load-balancing signal (docs/protocol.md §4.5): the responder echoes it per EV and the requester
  // skips that EV for a while. Every packet on path 3 of plane 0 is marked.
  PairOptions o;
  o.buf_size = 4 << 20;
  Pair p(o);
  p.net().path(0, 3).ecn = 1.0;
  ASSERT_EQ(p.write(1, 0, 4 << 20, 0), 0);
  ASSERT_TRUE(p.run_until_completions(1, 0, 20_ms));
  EXPECT_TRUE(p.same(0, 4 << 20, 0));
  ASSERT_GT(p.net().path_stats(0, 3).ecn_marked, 0u);
  std::uint32_t skips = 0;
  for (const auto& e : p.a_events()) {
    if (e.type != EventType::kEvState || e.cause != engine::EvCause::kEcnEcho) continue;
    ++skips;
    EXPECT_EQ(e.ev.port, 0);
    EXPECT_EQ(p.net().path_index(e.ev), 3u);
    EXPECT_EQ(e.to, engine::EvState::kSkip);
  }
  EXPECT_GT(skips, 0u) << "no EV was skipped for ECN although " << p.net().path_stats(0, 3).ecn_marked
                       << " packets were marked on its path";
}

TEST(EndpointOps, PortDownIsAnnouncedAndThePeerStopsUsingThePlane) {
  PairOptions o;
  o.buf_size = 8 << 20;
  Pair p(o);
  // Traffic both ways, so the peer (b) sends data on every plane too.
  std::vector<std::uint8_t> back(4 << 20);
  const engine::MemoryRegion* amr =
      p.a().memory().register_region(back.data(), back.size(), engine::access::kAll);
  ASSERT_NE(amr, nullptr);
  const std::uint32_t plane = 2;
  const Time down_at = 50_us;
  p.net().port_down(p.node_a(), plane, down_at);
  std::vector<sim::PacketRecord> from_b;
  p.net().set_observer([&](const sim::PacketRecord& r) {
    if (r.src == p.node_b()) from_b.push_back(r);
  });
  // a writes dst[0, 4 MiB); b sends dst[4 MiB, 8 MiB) (its own pattern) back to a.
  for (std::size_t i = 4 << 20; i < p.dst().size(); ++i) p.dst()[i] = static_cast<std::uint8_t>(i * 7 + 3);
  ASSERT_EQ(p.write(1, 0, 4 << 20, 0), 0);
  engine::SendWr wr;
  wr.wr_id = 2;
  wr.local_addr = reinterpret_cast<std::uintptr_t>(p.dst().data() + (4 << 20));
  wr.length = 4 << 20;
  wr.lkey = p.mr_b().lkey;
  wr.remote_addr = reinterpret_cast<std::uintptr_t>(back.data());
  wr.rkey = amr->rkey;
  ASSERT_EQ(p.b().post_send(p.qpn_b(), wr, 0), 0);
  p.net().kick(p.node_b());
  std::vector<engine::Completion> b_done;
  ASSERT_TRUE(p.net().run_while(
      [&] {
        engine::Completion c;
        while (p.b().poll_completion(c)) b_done.push_back(c);  // before drain() takes them
        p.drain();
        return p.send_done().empty() || b_done.empty();
      },
      20_ms));
  EXPECT_EQ(p.send_done()[0].status, engine::WcStatus::kSuccess);
  EXPECT_EQ(b_done[0].status, engine::WcStatus::kSuccess);
  EXPECT_TRUE(p.same(0, 4 << 20, 0));
  EXPECT_TRUE(std::equal(back.begin(), back.end(), p.dst().begin() + (4 << 20)));

  const auto ps = events_of(p.b_events(), EventType::kPortStatus);
  ASSERT_GE(ps.size(), 1u);
  const engine::Event& e = ps[0];
  EXPECT_EQ(e.peer, p.node_a());
  EXPECT_EQ(e.port_mask, 0xFu & ~(1u << plane));
  EXPECT_GE(e.time, down_at);
  EXPECT_LE(e.time, down_at + p.net().base_rtt());  // one-way trip on another plane
  EXPECT_EQ(p.qpb().peer_port_mask(), 0xFu & ~(1u << plane));
  EXPECT_EQ(p.qpb().evs().ports_with_good() & (1u << plane), 0u);
  EXPECT_EQ(p.qpb().evs().active_good(static_cast<std::uint8_t>(plane)), 0u);
  // b's EVs of that plane were retired with cause kPortDown.
  std::uint32_t retired = 0;
  for (const auto& ev : p.b_events()) {
    if (ev.type == EventType::kEvState && ev.cause == engine::EvCause::kPortDown) {
      EXPECT_EQ(ev.ev.port, plane);
      EXPECT_EQ(ev.to, engine::EvState::kAssumedBad);
      ++retired;
    }
  }
  EXPECT_EQ(retired, o.active_per_port + o.backup_per_port);
  // b used the plane before and never after it learned of the failure.
  std::uint64_t before = 0, after = 0;
  for (const auto& r : from_b) {
    if (r.plane != plane) continue;
    if (r.sent < down_at) ++before;
    if (r.sent > e.time + 1_us) ++after;
  }
  EXPECT_GT(before, 0u);
  EXPECT_EQ(after, 0u);
  // Locally, probes on the dead port are refused.
  EXPECT_EQ(p.a().send_ev_probe(p.node_b(), engine::Ev{1, static_cast<std::uint8_t>(plane)}, 1, 10_us,
                                p.net().now()),
            ENETDOWN);
}

/// Largest number of PSNs the requester had outstanding once the advertisement (if any) has taken
/// effect: from the first moment after a's first SACK at which it was within `limit`.
struct MprRun {
  std::uint32_t max_settled = 0;
  std::uint32_t max_overall = 0;
  bool done = false, exact = false;
  std::uint32_t window = 0;
};

MprRun run_mpr(bool advertise) {
  PairOptions o;
  o.nscc = false;        // only the MPR window limits the requester
  o.path.delay = 50_us;  // BDP of the 4 x 100 Gb/s ports: ~1200 packets > MPR 8 (1024 PSNs)
  o.buf_size = 8 << 20;
  Pair p(o);
  if (advertise) {
    EXPECT_EQ(p.qpb().set_advertised_mpr(1), 0);
  }
  MprRun r;
  EXPECT_EQ(p.write(1, 0, 8 << 20, 0), 0);
  bool settled = false;
  while (p.send_done().empty() && p.net().step(50_ms)) {
    p.drain();
    const std::uint32_t out = p.qpa().outstanding_psns();
    r.max_overall = std::max(r.max_overall, out);
    if (!settled && p.qpa().counters().rx_sack > 0 && out <= 128) settled = true;
    if (settled) r.max_settled = std::max(r.max_settled, out);
  }
  r.done = !p.send_done().empty() && p.send_done()[0].status == engine::WcStatus::kSuccess;
  r.exact = p.same(0, 8 << 20, 0);
  r.window = p.qpa().window_psns();
  return r;
}

TEST(EndpointOps, DynamicMprLimitsTheRequesterToTheAdvertisedWindow) {
  const MprRun adv = run_mpr(true);
  EXPECT_TRUE(adv.done);
  EXPECT_TRUE(adv.exact);
  EXPECT_EQ(adv.window, 128u);
  EXPECT_LE(adv.max_settled, 128u);
  EXPECT_GT(adv.max_settled, 64u);  // and it does use the window it has
  // Control: without the advertisement the same transfer keeps far more than 128 PSNs in flight.
  const MprRun plain = run_mpr(false);
  EXPECT_TRUE(plain.done);
  EXPECT_TRUE(plain.exact);
  EXPECT_EQ(plain.window, 1024u);
  EXPECT_GT(plain.max_overall, 512u);
  EXPECT_LE(plain.max_overall, 1024u);
}

TEST(EndpointOps, RetransmissionsStayInsideTheAdvertisedWindow) {
  // docs/protocol.md §4.2: a requester may not send a PSN beyond the responder's advertised window, and that
  // holds for retransmissions too. 300 packets are in flight when the responder shrinks its window to 128
  // PSNs; the first packet is lost, so everything from PSN+128 on is refused (PSN_OOR_WINDOW).
  PairOptions o;
  o.nscc = false;
  o.buf_size = 2 << 20;
  Pair p(o);
  const auto frames = first_data_frames(p, 300);
  ASSERT_EQ(frames.size(), 300u);
  ASSERT_EQ(p.qpb().set_advertised_mpr(1), 0);
  for (std::size_t i = 1; i < frames.size(); ++i) deliver(p.b(), frames[i], p.node_a(), 3000);
  const auto answers = pull_all(p.b(), 3000, 0xF);
  EXPECT_EQ(p.qpb().counters().nack_sent_by_reason[static_cast<int>(wire::NackReason::kPsnOorWindow)],
            300u - 128u);
  for (const Frame& f : answers) deliver(p.a(), f, p.node_b(), 5000);
  EXPECT_EQ(p.qpa().window_psns(), 128u);
  // Whatever a sends now must lie below the hole + 128 (the responder would refuse the rest).
  const std::uint32_t edge = psn_add(p.psn_ab(), 128);
  std::uint32_t beyond = 0, sent = 0;
  for (Time t = 5000; t < 60000; t += 1000) {
    p.a().on_timer(t);
    for (const Frame& f : pull_all(p.a(), t, 0xF)) {
      ++sent;
      if (f.tc != engine::TrafficClass::kControl && !psn_lt(f.psn, edge)) ++beyond;
    }
  }
  EXPECT_EQ(beyond, 0u) << "of " << sent << " packets sent after the window shrank";
}

TEST(EndpointOps, EventsOffKeepsNone) {
  // The same QP failure and EV probe timeout with and without EndpointConfig::events.
  for (const bool on : {true, false}) {
    engine::EndpointConfig ec;
    ec.num_ports = 2;
    ec.events = on;
    engine::Endpoint ep(ec);
    engine::QpConfig qc;
    qc.evs = engine::make_ev_set(2, 2, 0);
    const std::uint32_t qpn = ep.create_qp(qc);
    ASSERT_NE(qpn, 0u);
    engine::QpRemote r;
    r.peer = 1;
    r.qpn = 0x20;
    ASSERT_EQ(ep.connect_qp(qpn, r, 0), 0);
    ASSERT_EQ(ep.send_ev_probe(1, engine::Ev{5, 0}, 7, 1000, 0), 0);
    ep.on_timer(2000);
    ASSERT_EQ(ep.modify_to_error(qpn, 2000), 0);
    std::vector<EventType> types;
    engine::Event e;
    while (ep.poll_event(e)) types.push_back(e.type);
    if (on)
      EXPECT_EQ(types, (std::vector<EventType>{EventType::kEvProbeTimeout, EventType::kQpError}));
    else
      EXPECT_TRUE(types.empty());
    EXPECT_EQ(ep.qp_state(qpn), engine::QpState::kError);
  }
}

}  // namespace
}  // namespace mrc::test
