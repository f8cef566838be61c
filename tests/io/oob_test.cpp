#include "io/oob.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>
#include <thread>

namespace mrc::io {
namespace {

constexpr Duration kTimeout = 5'000'000'000;  // generous: the test fails on error, not on time

ConnInfo sample(std::uint32_t qpn, const char* prefix) {
  ConnInfo c;
  c.qpn = qpn;
  c.psn = random_psn();
  c.rkey = 0xDEADBEEF;
  c.va = 0x7F0012345678ull;
  c.length = 64ull << 20;
  c.mpr_dest = 4;
  c.max_wimm_dest = 77;
  for (int i = 1; i <= 4; ++i) {
    IpAddr a;
    EXPECT_TRUE(IpAddr::parse(std::string(prefix) + std::to_string(i), a));
    c.planes.push_back(a);
  }
  return c;
}

TEST(Oob, RandomPsnIs24Bits) {
  bool differs = false;
  const std::uint32_t first = random_psn();
  for (int i = 0; i < 100; ++i) {
    const std::uint32_t p = random_psn();
    EXPECT_LE(p, 0xFFFFFFu);
    differs |= p != first;
  }
  EXPECT_TRUE(differs);
}

TEST(Oob, ExchangeOverLoopbackTcp) {
  OobListener l;
  std::string err;
  ASSERT_TRUE(l.listen("127.0.0.1", 0, err)) << err;
  ASSERT_NE(l.port(), 0);
  const ConnInfo server_info = sample(17, "127.0.0.");
  const ConnInfo client_info = sample(33, "::");  // IPv6 plane addresses round-trip too
  ConnInfo got_by_server;
  std::string server_err;
  bool server_ok = false;
  std::thread server([&] {
    auto ch = l.accept(kTimeout, server_err);
    if (!ch) return;
    server_ok = ch->exchange(server_info, got_by_server, kTimeout, server_err);
    const std::uint64_t vals[] = {1, 2, 0xFFFFFFFFFFFFFFFFull};
    server_ok = server_ok && ch->send_values(vals, server_err);
  });
  auto ch = OobChannel::connect("127.0.0.1", l.port(), kTimeout, err);
  ASSERT_TRUE(ch) << err;
  ConnInfo got;
  ASSERT_TRUE(ch->exchange(client_info, got, kTimeout, err)) << err;
  std::vector<std::uint64_t> vals;
  ASSERT_TRUE(ch->recv_values(vals, kTimeout, err)) << err;
  server.join();
  ASSERT_TRUE(server_ok) << server_err;
  EXPECT_EQ(got, server_info);
  EXPECT_EQ(got_by_server, client_info);
  EXPECT_EQ(vals, (std::vector<std::uint64_t>{1, 2, 0xFFFFFFFFFFFFFFFFull}));
}

TEST(Oob, ConnectRetriesUntilTheServerListens) {
  // Find a free port, release it, and start listening on it only after the client began trying.
  std::uint16_t port = 0;
  {
    OobListener probe;
    std::string err;
    ASSERT_TRUE(probe.listen("127.0.0.1", 0, err)) << err;
    port = probe.port();
  }
  OobListener l;
  std::string lerr;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (l.listen("127.0.0.1", port, lerr)) {
      std::string e;
      auto c = l.accept(kTimeout, e);
    }
  });
  std::string err;
  auto ch = OobChannel::connect("127.0.0.1", port, kTimeout, err);
  late.join();
  EXPECT_TRUE(lerr.empty()) << lerr;
  EXPECT_TRUE(ch) << err;
}

TEST(Oob, ConnectFailsWithMessageAfterTimeout) {
  std::uint16_t port = 0;
  {
    OobListener probe;
    std::string err;
    ASSERT_TRUE(probe.listen("127.0.0.1", 0, err)) << err;
    port = probe.port();
  }
  std::string err;
  EXPECT_FALSE(OobChannel::connect("127.0.0.1", port, 100'000'000, err));
  EXPECT_NE(err.find("cannot connect"), std::string::npos) << err;
  EXPECT_FALSE(OobChannel::connect("no.such.host.invalid", port, 100'000'000, err));
  EXPECT_NE(err.find("resolve"), std::string::npos) << err;
}

/// Sends `bytes` from a client and returns the server's error for recv_conn_info.
std::string server_error_for(const std::vector<std::uint8_t>& bytes, bool close_after = true) {
  OobListener l;
  std::string err;
  EXPECT_TRUE(l.listen("127.0.0.1", 0, err)) << err;
  std::thread client([&] {
    std::string e;
    auto ch = OobChannel::connect("127.0.0.1", l.port(), kTimeout, e);
    if (ch) ch->send_raw(bytes, e);
    if (!close_after) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  });
  std::string serr;
  auto ch = l.accept(kTimeout, serr);
  EXPECT_TRUE(ch) << serr;
  ConnInfo c;
  const bool ok = ch && ch->recv_conn_info(c, close_after ? kTimeout : 100'000'000, serr);
  client.join();
  EXPECT_FALSE(ok);
  return serr;
}

TEST(Oob, MalformedMessagesGiveClearErrors) {
  const std::vector<std::uint8_t> good = encode_conn_info(sample(5, "127.0.0."));
  auto with = [&](std::size_t at, std::uint8_t v) {
    auto b = good;
    b[at] = v;
    return b;
  };
  EXPECT_NE(server_error_for(with(0, 'X')).find("bad magic"), std::string::npos);
  EXPECT_NE(server_error_for(with(5, 9)).find("unsupported version 9"), std::string::npos);
  EXPECT_NE(server_error_for(with(7, 42)).find("unknown message type"), std::string::npos);
  EXPECT_NE(server_error_for(with(8, 0x7F)).find("too large"), std::string::npos);
  // Truncated: the peer closes mid-message.
  EXPECT_NE(server_error_for({good.begin(), good.begin() + 20}).find("truncated"), std::string::npos);
  EXPECT_NE(server_error_for({good.begin(), good.begin() + 5}).find("truncated"), std::string::npos);
  EXPECT_NE(server_error_for({}).find("closed"), std::string::npos);
  // Stalled: the peer stays connected but never finishes.
  EXPECT_NE(server_error_for({good.begin(), good.begin() + 20}, false).find("timed out"), std::string::npos);
  // Wrong type for the call.
  const std::uint64_t v[] = {1};
  EXPECT_NE(server_error_for(encode_values(v)).find("expected message type"), std::string::npos);
}

TEST(Oob, ErrorMessageGivesThePeersReason) {
  // Version 4 on the wire, type 3, the text as the body.
  const std::vector<std::uint8_t> e = encode_error("planes: 2 vs 4");
  ASSERT_EQ(e.size(), 12u + 14u);
  EXPECT_EQ(e[4], 0);
  EXPECT_EQ(e[5], 4);
  EXPECT_EQ(e[7], static_cast<std::uint8_t>(OobType::kError));
  EXPECT_EQ(std::string(e.begin() + 12, e.end()), "planes: 2 vs 4");
  EXPECT_EQ(encode_error(std::string(5000, 'x')).size(), 12u + kOobMaxError);
  // Whatever the receiver waits for, the peer's error ends the wait with its text (non-printable
  // bytes shown as '?').
  OobListener l;
  std::string err;
  ASSERT_TRUE(l.listen("127.0.0.1", 0, err)) << err;
  std::thread server([&] {
    std::string e2;
    auto ch = l.accept(kTimeout, e2);
    if (!ch) return;
    ch->send_error("refused: qps 0\n", e2);
    ch->send_error("second", e2);
  });
  auto ch = OobChannel::connect("127.0.0.1", l.port(), kTimeout, err);
  ASSERT_TRUE(ch) << err;
  std::vector<std::uint64_t> vals;
  EXPECT_FALSE(ch->recv_values(vals, kTimeout, err));
  EXPECT_EQ(err, "peer: refused: qps 0?");
  ConnInfo c;
  EXPECT_FALSE(ch->recv_conn_info(c, kTimeout, err));
  EXPECT_EQ(err, "peer: second");
  server.join();
  // An error body beyond kOobMaxError is refused in the header.
  std::vector<std::uint8_t> big = encode_error("x");
  big[10] = 0x10;  // body length 0x1001
  OobType t{};
  std::uint32_t len = 0;
  EXPECT_FALSE(decode_header(std::span(big).first(12), t, len, err));
  EXPECT_NE(err.find("too large"), std::string::npos) << err;
}

TEST(Oob, ConnectToAnAddressThatNeverAnswersIsBoundedByTheTimeout) {
  // A listener whose backlog is full: the kernel drops further SYNs, so connect() hangs unless the
  // timeout bounds it. The elapsed time is not asserted, only that connect returns with an error.
  OobListener l;
  std::string err;
  ASSERT_TRUE(l.listen("127.0.0.1", 0, err)) << err;
  std::vector<std::optional<OobChannel>> held;
  bool refused = false;
  for (int i = 0; i < 64 && !refused; ++i) {
    auto ch = OobChannel::connect("127.0.0.1", l.port(), 200'000'000, err);
    refused = !ch;
    held.push_back(std::move(ch));
  }
  EXPECT_TRUE(refused) << "64 connections into a backlog of 16 all succeeded";
  EXPECT_NE(err.find("cannot connect"), std::string::npos) << err;
}

TEST(Oob, MalformedBodiesAreRejected) {
  const std::vector<std::uint8_t> framed = encode_conn_info(sample(5, "127.0.0."));
  const std::vector<std::uint8_t> body(framed.begin() + 12, framed.end());
  ConnInfo c;
  std::string err;
  ASSERT_TRUE(decode_conn_info_body(body, c, err)) << err;
  EXPECT_EQ(c.qpn, 5u);
  EXPECT_EQ(c.planes.size(), 4u);
  for (std::size_t cut = 0; cut < body.size(); ++cut) {
    EXPECT_FALSE(decode_conn_info_body(std::span(body).first(cut), c, err)) << cut;
    EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  }
  auto extra = body;
  extra.push_back(0);
  EXPECT_FALSE(decode_conn_info_body(extra, c, err));
  EXPECT_NE(err.find("trailing"), std::string::npos);
  auto bad_psn = body;
  bad_psn[4] = 0x01;  // PSN high byte
  EXPECT_FALSE(decode_conn_info_body(bad_psn, c, err));
  EXPECT_NE(err.find("24 bits"), std::string::npos);
  auto bad_family = body;
  bad_family[32] = 5;  // first plane's family byte
  EXPECT_FALSE(decode_conn_info_body(bad_family, c, err));
  EXPECT_NE(err.find("family"), std::string::npos);
  auto no_planes = body;
  no_planes[31] = 0;
  EXPECT_FALSE(decode_conn_info_body(no_planes, c, err));
  EXPECT_NE(err.find("plane count"), std::string::npos);
  std::vector<std::uint64_t> vals;
  const std::uint8_t short_values[] = {0, 0, 0, 2, 1, 2, 3};
  EXPECT_FALSE(decode_values_body(short_values, vals, err));
}

std::vector<std::uint8_t> header(std::uint16_t type, std::uint32_t len) {
  return {'M',
          'R',
          'C',
          'O',
          0,
          static_cast<std::uint8_t>(kOobVersion),
          0,
          static_cast<std::uint8_t>(type),
          static_cast<std::uint8_t>(len >> 24),
          static_cast<std::uint8_t>(len >> 16),
          static_cast<std::uint8_t>(len >> 8),
          static_cast<std::uint8_t>(len)};
}

TEST(Oob, EachTypeHasItsOwnBodyLimit) {
  // The largest real message of each type fits its limit.
  ConnInfo big = sample(5, "::");
  big.planes.assign(engine::kMaxPorts, big.planes[0]);
  big.auth = true;
  EXPECT_EQ(encode_conn_info(big).size(), kOobHeader + kOobMaxConnInfo);
  EXPECT_EQ(encode_values(std::vector<std::uint64_t>(kOobMaxValues, 7)).size(),
            kOobHeader + kOobMaxValuesBody);
  const struct {
    OobType type;
    std::uint32_t max;
  } cases[] = {{OobType::kConnInfo, kOobMaxConnInfo},
               {OobType::kValues, kOobMaxValuesBody},
               {OobType::kError, kOobMaxError}};
  for (const auto& c : cases) {
    OobType t{};
    std::uint32_t len = 0;
    std::string err;
    EXPECT_EQ(oob_max_body(c.type), c.max);
    EXPECT_TRUE(decode_header(header(static_cast<std::uint16_t>(c.type), c.max), t, len, err)) << err;
    EXPECT_EQ(len, c.max);
    for (const std::uint32_t over : {c.max + 1, 1u << 16, 0xFFFFFFFFu}) {
      EXPECT_FALSE(decode_header(header(static_cast<std::uint16_t>(c.type), over), t, len, err)) << over;
      EXPECT_NE(err.find("too large (" + std::to_string(over) + " bytes; a type " +
                         std::to_string(static_cast<int>(c.type)) + " message has at most " +
                         std::to_string(c.max) + ")"),
                std::string::npos)
          << err;
    }
  }
}

TEST(Oob, FrameReaderRefusesAnOversizedHeaderBeforeTakingItsBody) {
  std::vector<std::uint8_t> in = header(static_cast<std::uint16_t>(OobType::kValues), 0xFFFFFFF0u);
  in.resize(in.size() + 4096, 0xAB);  // what an attacker sends after it
  OobFrameReader rd;
  std::size_t used = 0;
  std::string err;
  EXPECT_EQ(rd.feed(in, used, err), OobFrameReader::Status::kError);
  EXPECT_EQ(used, kOobHeader);  // not one body byte taken, no room made for it
  EXPECT_TRUE(rd.body().empty());
  EXPECT_NE(err.find("too large"), std::string::npos) << err;
  // Once failed, it stays failed until reset.
  EXPECT_EQ(rd.feed(std::span(in).subspan(kOobHeader), used, err), OobFrameReader::Status::kError);
  EXPECT_EQ(used, 0u);
}

TEST(Oob, FrameReaderTakesExactlyOneMessageHoweverItArrives) {
  const ConnInfo c = sample(9, "127.0.0.");
  const std::uint64_t v[] = {1, 2, 3};
  std::vector<std::uint8_t> stream = encode_conn_info(c);
  const std::size_t first = stream.size();
  const std::vector<std::uint8_t> second = encode_values(v);
  stream.insert(stream.end(), second.begin(), second.end());
  for (const std::size_t chunk : {std::size_t{1}, std::size_t{5}, std::size_t{12}, stream.size()}) {
    OobFrameReader rd;
    std::string err;
    std::size_t at = 0, used = 0;
    while (rd.status() == OobFrameReader::Status::kMore && at < stream.size()) {
      rd.feed(std::span(stream).subspan(at, std::min(chunk, stream.size() - at)), used, err);
      at += used;
    }
    ASSERT_EQ(rd.status(), OobFrameReader::Status::kDone) << chunk << ": " << err;
    EXPECT_EQ(at, first) << chunk;  // the second message is left for the next read
    ConnInfo got;
    ASSERT_TRUE(rd.is(OobType::kConnInfo, err)) << err;
    ASSERT_TRUE(decode_conn_info_body(rd.body(), got, err)) << err;
    EXPECT_EQ(got, c);
    EXPECT_FALSE(rd.is(OobType::kValues, err));
    EXPECT_NE(err.find("expected message type 2, got 1"), std::string::npos) << err;
    rd.reset();
    rd.feed(std::span(stream).subspan(at), used, err);
    ASSERT_EQ(rd.status(), OobFrameReader::Status::kDone) << err;
    std::vector<std::uint64_t> vals;
    ASSERT_TRUE(decode_values_body(rd.body(), vals, err)) << err;
    EXPECT_EQ(vals, (std::vector<std::uint64_t>{1, 2, 3}));
  }
  // An error message: the peer's text, whatever was expected.
  OobFrameReader rd;
  std::string err;
  std::size_t used = 0;
  const std::vector<std::uint8_t> e = encode_error("no\x01way");
  ASSERT_EQ(rd.feed(e, used, err), OobFrameReader::Status::kDone);
  EXPECT_FALSE(rd.is(OobType::kValues, err));
  EXPECT_EQ(err, "peer: no?way");
}

TEST(Oob, FrameReaderOnASocketReadsOnlyWhatIsThereAndOnlyItsMessage) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  OobFrameReader rd;
  std::string err;
  EXPECT_EQ(rd.read_from(sv[0], err), OobFrameReader::Status::kMore);  // nothing yet: no wait
  const std::uint64_t a[] = {42}, b[] = {43, 44};
  std::vector<std::uint8_t> two = encode_values(a);
  const std::vector<std::uint8_t> mb = encode_values(b);
  two.insert(two.end(), mb.begin(), mb.end());
  ASSERT_EQ(::write(sv[1], two.data(), 5), 5);
  EXPECT_EQ(rd.read_from(sv[0], err), OobFrameReader::Status::kMore);
  EXPECT_EQ(rd.received(), 5u);
  EXPECT_EQ(rd.expected(), kOobHeader);
  ASSERT_EQ(::write(sv[1], two.data() + 5, two.size() - 5), static_cast<ssize_t>(two.size() - 5));
  ASSERT_EQ(rd.read_from(sv[0], err), OobFrameReader::Status::kDone) << err;
  std::vector<std::uint64_t> vals;
  ASSERT_TRUE(decode_values_body(rd.body(), vals, err)) << err;
  EXPECT_EQ(vals, (std::vector<std::uint64_t>{42}));
  rd.reset();
  ASSERT_EQ(rd.read_from(sv[0], err), OobFrameReader::Status::kDone) << err;
  ASSERT_TRUE(decode_values_body(rd.body(), vals, err)) << err;
  EXPECT_EQ(vals, (std::vector<std::uint64_t>{43, 44}));
  // Cut short: the peer closes mid-header.
  rd.reset();
  ASSERT_EQ(::write(sv[1], two.data(), 3), 3);
  ::close(sv[1]);
  EXPECT_EQ(rd.read_from(sv[0], err), OobFrameReader::Status::kError);
  EXPECT_EQ(err, "oob: truncated message (peer closed after 3 of 12 bytes)");
  ::close(sv[0]);
}

TEST(Oob, ValueListsHaveACountLimit) {
  std::vector<std::uint64_t> vals;
  std::string err;
  const std::vector<std::uint8_t> ok = encode_values(std::vector<std::uint64_t>(kOobMaxValues, 1));
  EXPECT_TRUE(decode_values_body(std::span(ok).subspan(kOobHeader), vals, err)) << err;
  const std::vector<std::uint8_t> over = encode_values(std::vector<std::uint64_t>(kOobMaxValues + 1, 1));
  EXPECT_FALSE(decode_values_body(std::span(over).subspan(kOobHeader), vals, err));
  EXPECT_NE(err.find("value list of 1025 values (at most 1024)"), std::string::npos) << err;
  // ... and the frame of such a list is refused by its header already.
  OobType t{};
  std::uint32_t len = 0;
  EXPECT_FALSE(decode_header(std::span(over).first(kOobHeader), t, len, err));
}

TEST(Oob, SendToAPeerThatReadsNothingIsBounded) {
  OobListener l;
  std::string err;
  ASSERT_TRUE(l.listen("127.0.0.1", 0, err)) << err;
  auto ch = OobChannel::connect("127.0.0.1", l.port(), kTimeout, err);
  ASSERT_TRUE(ch) << err;
  auto peer = l.accept(kTimeout, err);  // accepted, never read
  ASSERT_TRUE(peer) << err;
  ch->set_send_timeout(100'000'000);
  const std::vector<std::uint8_t> lots(64u << 20, 0);
  EXPECT_FALSE(ch->send_raw(lots, err));
  EXPECT_NE(err.find("timed out sending to the peer"), std::string::npos) << err;
}

TEST(Oob, AuthKeyRoundTripsAndBothSidesMustAgree) {
  ConnInfo mine = sample(5, "127.0.0."), theirs = sample(6, "127.0.0.");
  std::string err;
  engine::QpAuth qa;
  ASSERT_TRUE(qp_auth(mine, theirs, qa, err)) << err;
  EXPECT_FALSE(qa.on);
  mine.auth = theirs.auth = true;
  ASSERT_TRUE(random_mac_key(mine.auth_key, err)) << err;
  ASSERT_TRUE(random_mac_key(theirs.auth_key, err)) << err;
  EXPECT_NE(mine.auth_key, theirs.auth_key);
  EXPECT_NE(mine.auth_key, engine::MacKey{});
  const std::vector<std::uint8_t> framed = encode_conn_info(theirs);
  ConnInfo got;
  ASSERT_TRUE(decode_conn_info_body(std::span(framed).subspan(12), got, err)) << err;
  EXPECT_EQ(got, theirs);
  ASSERT_TRUE(qp_auth(mine, got, qa, err)) << err;
  EXPECT_TRUE(qa.on);
  EXPECT_EQ(qa.tx, mine.auth_key);
  EXPECT_EQ(qa.rx, theirs.auth_key);
  // One side only: a clear error on both sides, never a silently dead connection.
  theirs.auth = false;
  EXPECT_FALSE(qp_auth(mine, theirs, qa, err));
  EXPECT_NE(err.find("does not authenticate"), std::string::npos) << err;
  EXPECT_FALSE(qp_auth(theirs, mine, qa, err));
  EXPECT_NE(err.find("requires authenticated"), std::string::npos) << err;
  // A bad flag and a cut key are refused.
  std::vector<std::uint8_t> body(framed.begin() + 12, framed.end());
  auto bad_flag = body;
  bad_flag[body.size() - 18] = 2;  // the flag, before the key and the wire_ext byte
  EXPECT_FALSE(decode_conn_info_body(bad_flag, got, err));
  EXPECT_NE(err.find("authentication flag"), std::string::npos) << err;
  EXPECT_FALSE(decode_conn_info_body(std::span(body).first(body.size() - 1), got, err));
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
}

TEST(Oob, WireExtRoundTripsAndIsOnOnlyWhenBothOfferIt) {
  // D45: a side that does not offer the extensions (or an older peer) gets spec packets both ways.
  ConnInfo mine = sample(5, "127.0.0."), theirs = sample(6, "127.0.0.");
  std::string err;
  for (const bool a : {false, true}) {
    for (const bool b : {false, true}) {
      mine.wire_ext = a;
      theirs.wire_ext = b;
      const std::vector<std::uint8_t> framed = encode_conn_info(theirs);
      ConnInfo got;
      ASSERT_TRUE(decode_conn_info_body(std::span(framed).subspan(12), got, err)) << err;
      EXPECT_EQ(got, theirs);
      EXPECT_EQ(qp_wire_ext(mine, got), a && b);
      EXPECT_EQ(qp_wire_ext(got, mine), a && b);
    }
  }
  std::vector<std::uint8_t> body = encode_conn_info(theirs);
  body.erase(body.begin(), body.begin() + 12);
  body.back() = 2;
  ConnInfo got;
  EXPECT_FALSE(decode_conn_info_body(body, got, err));
  EXPECT_NE(err.find("wire extension flag must be 0 or 1"), std::string::npos) << err;
}

}  // namespace
}  // namespace mrc::io
