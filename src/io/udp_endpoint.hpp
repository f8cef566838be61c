// The software MRC endpoint over Linux UDP ("what Soft-RoCE is to RoCE"): one per host, owning an
// engine::Endpoint and driving many QPs over P planes (plane i = NIC port i = one local address).
//
// Transmit: each TxPacket leaves on the plane of its EV (TxPacket.port) toward the peer's address
// on that plane, UDP destination port 4791. The EV value's wire form (docs/decisions.md D37): a value
// whose high 16 bits are non-zero names its UDP source port there and, in STEV mode (IPv6 only), its
// flow label in the low 16 bits (what a controller's UDP/STEV EV expands to); a value below 2^16
// (AUTO EVs) is spread: source port sport_base + value % sport_range, STEV flow label = the value.
// The flow label is set per packet through IPV6_FLOWINFO_SEND. A send socket exists per
// (plane, sport), created on the first use of that sport. Packets are batched per plane and sent with
// sendmmsg per socket as header / payload (a view into the registered region) / trailer iovecs: no copy.
// The ICRC is RoCEv2's (docs/wire-format.md W22): the engine's, over BTH onward, XORed with what the
// masked IP/UDP headers add (wire::icrc_prefix_xor, no second pass over the payload); on receive the
// same XOR goes to the engine in RxMeta::icrc_xor.
//
// SRv6 mode (IPv6 only): the plane addresses are the hosts' final uSID addresses. EV value v
// follows path v % srv6.paths.size() (set_srv6_paths() replaces the list: a controller's table of
// SRv6 EVs, so value i is exactly its EV i): the packet's IPv6 destination is the uSID carrier
// <peer's locator block>:<the path's uSIDs>:<rest of the peer's final address> (Srv6Config), which
// the routers' End (next-csid) behaviour shifts back to the peer's final address. The EV also goes in
// the UDP source port (always spread: there the value is a path index), so the receiver can reflect it. The
// UDP checksum must hold at the FINAL destination, which a UDP socket cannot do (it checksums over the
// carrier): these packets leave through raw IPv6 sockets (IPPROTO_RAW, one per (plane, sport)) with an IPv6 +
// UDP header built here and checksummed over the final address (docs/platform.md §4). Needs CAP_NET_RAW.
//
// Receive: one socket per plane bound to (plane address, 4791), read with recvmmsg. ECN-CE and the
// DSCP (trimmed / trimmed-last-hop code points) come from IP_RECVTOS / IPV6_RECVTCLASS; the EV
// from the source port (and the flow label in STEV mode), ev_of_wire(). A source address that is not a known
// peer's address on that plane gets kUnknownPeer, a handle no QP has, so the engine refuses it.
//
// Progress: one concurrency model, whoever drives it (msquic's: API calls are operations queued to
// the progress context). The engine belongs to whoever holds the endpoint's engine lock: a progress
// round — run by the endpoint's own thread after start(), or by the application's thread in
// progress() — or a control call inside execute(fn). Nothing else touches it.
//   * post_send / post_recv (any thread, several at once) queue the work request on a lock-free
//     ring and wake a sleeping round; the next round (or execute()) hands it to the engine. A request
//     the engine refuses completes with kLocalProtectionError; one for a QP in ERROR completes
//     kFlushed (verbs).
//   * Each round, and each execute(), ends by exporting the engine's completions and events: to
//     the export hook when one is set (libmrc's CQs: no queue in between), else to the rings that
//     poll_completion / poll_event read (one consumer thread each).
//   * Everything else that touches the engine (add_peer, register_region, create_qp, connect_qp,
//     counters, metrics) runs inside execute(fn) — or with no round running at all (before
//     start(), between progress() calls of a single-threaded application). execute() takes the
//     lock between rounds (a round about to start waits for it: control calls are never starved),
//     never per packet. Called back from inside a round it runs fn at once.
// Plane links: the endpoint watches the link of each plane's interface (the one holding its local
// address, found at open) through an rtnetlink socket (RTMGRP_LINK) in its epoll set, read when
// idle and at least every millisecond when busy. A link going down (not IFF_UP + IFF_RUNNING, or
// removed) is engine().set_port_up(plane, false): the engine moves that plane's EVs and in-flight
// packets to the other planes and tells the peers; coming back is set_port_up(plane, true). A send
// failing with ENETUNREACH / ENETDOWN makes the endpoint ask the kernel for that link's state at
// once (at most once a millisecond per plane) rather than wait for the notification.
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/endpoint.hpp"
#include "io/addr.hpp"
#include "io/impair.hpp"
#include "io/link_watch.hpp"
#include "io/pcap.hpp"
#include "io/ring.hpp"
#include "io/srv6.hpp"

namespace mrc::io {

enum class EvMode : std::uint8_t {
  kUdp,   ///< EV -> UDP source port
  kStev,  ///< EV -> IPv6 flow label (EV bits 15-0) + UDP source port (bits 31-16)
  kSrv6,  ///< EV -> SRv6 uSID carrier (IPv6 destination) + UDP source port
};

struct UdpConfig {
  std::vector<IpAddr> planes;  ///< local address of each plane (all the same family)
  EvMode ev_mode = EvMode::kUdp;
  Srv6Config srv6;            ///< ev_mode kSrv6: the paths EVs map onto
  std::uint16_t port = 4791;  ///< RoCEv2 destination port (receive sockets bind it)
  std::uint16_t sport_base = 49152;
  std::uint16_t sport_range = 16384;       ///< spread EVs (< 2^16): sport = sport_base + ev % sport_range
  std::uint8_t dscp = 0;                   ///< DSCP of everything we send
  bool ect = true;                         ///< send ECT(0) so the network can mark CE
  std::uint8_t dscp_trimmed = 59;          ///< received DSCP meaning "trimmed" (>63 = never); pool 2 (EXP/LU)
  std::uint8_t dscp_trimmed_lasthop = 63;  ///< received DSCP meaning "trimmed at the last hop"
  std::uint32_t tx_batch = 32;             ///< packets per plane per flush
  std::uint32_t rx_batch = 64;             ///< datagrams per recvmmsg
  std::uint32_t max_packet = 4400;         ///< receive buffer size (pmtu + headers)
  /// UDP segmentation offload (D36): 0 = off; N (2..64) = every QP sends N packets on one EV
  /// (engine Tunables::ev_burst), a plane's consecutive same-EV packets leave as one GSO send, and
  /// receive sockets take GRO batches. Not in SRv6 mode (raw sockets).
  std::uint32_t gso_burst = 0;
  int socket_buffer = 8 << 20;        ///< SO_SNDBUF / SO_RCVBUF (FORCE when permitted)
  std::uint32_t queue_depth = 16384;  ///< command / completion / event rings
  /// The ICRC covers the masked IPv4/IPv6 + UDP headers as well, as RoCEv2's does (docs/wire-format.md
  /// W22): computed on send, checked on receive (IPv4: any identification). Off: the engine's ICRC
  /// without them (W16), what the simulator sends. Needs engine.icrc.
  bool rocev2_icrc = true;
  engine::EndpointConfig engine;  ///< num_ports is set from planes
  ImpairConfig impair;            ///< applied to received packets
};

struct PlaneCounters {
  std::uint64_t tx_packets = 0, tx_bytes = 0, tx_batches = 0, tx_syscalls = 0;
  std::uint64_t tx_gso_messages = 0;  ///< sends of several datagrams (UDP GSO)
  std::uint64_t rx_gro_packets = 0;   ///< datagrams that arrived inside a GRO batch of two or more
  std::uint64_t tx_dropped = 0;       ///< the kernel refused (EAGAIN / ENOBUFS / no socket)
  std::uint64_t tx_no_route = 0;      ///< packet for an unknown peer
  std::uint64_t rx_packets = 0, rx_bytes = 0, rx_syscalls = 0;
  std::uint64_t rx_ecn_ce = 0, rx_trimmed = 0;
  std::uint64_t rx_unknown_source = 0;  ///< source address is no peer's address on this plane
  std::uint64_t rx_truncated = 0;       ///< larger than max_packet
  std::uint32_t send_sockets = 0;       ///< sports in use
  std::uint64_t link_down_events = 0;   ///< the plane's link went down (engine port set down)
  std::uint64_t link_up_events = 0;     ///< the plane's link came back (engine port set up)
};

/// Packets sent on one EV (one (plane, sport) send socket).
struct EvTxCounter {
  std::uint8_t plane = 0;
  std::uint16_t sport = 0;
  std::uint64_t packets = 0;
};

class UdpEndpoint {
 public:
  static constexpr std::uint32_t kUnknownPeer = engine::kNoPeer;

  /// Opens the receive sockets and the epoll set. nullptr with a message in `err` on failure.
  static std::unique_ptr<UdpEndpoint> create(const UdpConfig& cfg, std::string& err);
  ~UdpEndpoint();
  UdpEndpoint(const UdpEndpoint&) = delete;
  UdpEndpoint& operator=(const UdpEndpoint&) = delete;

  const UdpConfig& config() const { return cfg_; }
  std::uint32_t num_planes() const { return static_cast<std::uint32_t>(planes_.size()); }
  /// The interface whose link plane `plane` follows (0: its address is on no interface, unwatched).
  int plane_ifindex(std::uint32_t plane) const { return planes_[plane].ifindex; }
  /// Monotonic time in ns: the engine's clock.
  static Time now();

  // --- control plane: stopped thread or inside execute() ---------------------------------------
  /// Registers a peer by its address on every plane; returns its handle (>= 1), 0 if the address
  /// list does not match the planes (count or family) or, in SRv6 mode, an address has no room for
  /// the paths' uSIDs. `port` is the peer's receive port
  /// (0 = config().port, the RoCEv2 port; other values let two endpoints share one address).
  std::uint32_t add_peer(const std::vector<IpAddr>& addrs, std::uint16_t port = 0);
  /// The peer handle datagrams from `addr` on `plane` are attributed to (0: none). When several
  /// peers have that address there, the latest registered wins, so a QP's peer added after a probe's
  /// stand-in for the same address gets its traffic.
  std::uint32_t peer_at(std::uint32_t plane, const IpAddr& addr) const;
  engine::Endpoint& engine() { return *ep_; }
  const engine::Endpoint& engine() const { return *ep_; }
  /// Runs fn with the engine between two progress rounds, on the calling thread (udp_endpoint.hpp,
  /// "Progress"); queued work requests are handed to the engine first, completions exported after.
  void execute(const std::function<void(engine::Endpoint&)>& fn);
  /// SRv6 mode: replaces the uSID path list (EV value v takes path v % paths.size()) and rebuilds
  /// every peer's carriers. False with the reason, changing nothing, when a path is empty, does not
  /// fit the block, or leaves a peer's final address no room; or when not in SRv6 mode.
  bool set_srv6_paths(std::vector<std::vector<std::uint16_t>> paths, std::string& err);
  /// SRv6 mode: the IPv6 destination (carrier) of a packet to `peer` on `plane` with EV value `v`.
  /// False for an unknown peer or plane, or outside SRv6 mode.
  bool srv6_destination(std::uint32_t peer, std::uint32_t plane, std::uint32_t v, IpAddr& out) const;
  /// What the link watcher does with a report: a change of a plane's link state sets the engine
  /// port down / up and counts it; a repeat or another interface does nothing.
  void apply_link_state(const LinkState& s, Time now);

  // --- data path: any thread ------------------------------------------------------------------
  /// 0 (queued for the next round), or EAGAIN if the command ring (queue_depth) is full. A request
  /// the engine refuses completes with kLocalProtectionError; one for a QP in ERROR with kFlushed.
  int post_send(std::uint32_t qpn, const engine::SendWr& wr);
  int post_recv(std::uint32_t qpn, std::uint64_t wr_id);
  bool poll_completion(engine::Completion& out);
  bool poll_event(engine::Event& out);

  // --- progress ---------------------------------------------------------------------------------
  /// One round on the calling thread: queued work requests, receive, timers, transmit, export.
  /// Blocks up to `timeout` (ns) when there is nothing to do. Returns the number of packets moved;
  /// 0 at once while the progress thread runs (it does the rounds then).
  std::size_t progress(Duration timeout = 0);
  bool start();
  void stop();
  /// Runs `fn` with the engine at the end of each round and execute(); it takes the completions and
  /// events itself (Endpoint::poll_completion / poll_event) into its own queues (CQs, channels): no
  /// ring between the engine and the consumer. While a hook is set the completion and event rings
  /// stay empty. Set it while no round runs (before start(), or between progress() calls).
  void set_export_hook(std::function<void(engine::Endpoint&)> fn) { export_hook_ = std::move(fn); }
  bool running() const { return threaded_.load(); }

  // --- statistics: stopped thread or inside execute() ------------------------------------------
  const std::vector<PlaneCounters>& plane_counters() const { return plane_ctr_; }
  std::vector<EvTxCounter> ev_tx_counters() const;
  const ImpairStats& impair_stats() const { return impair_.stats(); }
  /// Records every sent and received datagram (before impairment) into `w` (nullptr: off). The
  /// writer must outlive the endpoint or be removed first. Control-plane call.
  void set_pcap(PcapWriter* w) { pcap_ = w; }
  std::uint64_t commands_refused() const { return cmd_refused_; }

  // --- EV value <-> wire (D37); any thread (configuration only) ---------------------------------
  /// The UDP source port of EV value v: v >> 16 when that is non-zero (the EV names its port), else
  /// spread, sport_base + v % sport_range. SRv6 mode always spreads (v is a path index there).
  std::uint16_t sport_of(std::uint32_t v) const {
    if (cfg_.ev_mode != EvMode::kSrv6 && (v >> 16) != 0) return static_cast<std::uint16_t>(v >> 16);
    return static_cast<std::uint16_t>(cfg_.sport_base + v % cfg_.sport_range);
  }
  /// STEV mode: the flow label of EV value v, its low 16 bits (a spread value is its own label).
  static std::uint32_t flow_label_of(std::uint32_t v) { return v & 0xFFFFu; }
  /// The EV value a receiver with this configuration recovers from a datagram's source port and
  /// (STEV mode) flow label, which its responder reflects: the inverse of sport_of / flow_label_of.
  /// A port inside the spread range reads as spread (STEV: when the label's spread port is that
  /// port), any other port as named, sport << 16 (| label in STEV mode).
  std::uint32_t ev_of_wire(std::uint16_t sport, std::uint32_t flow_label) const;
  /// The single EV value of v's wire form, ev_of_wire(sport_of(v), flow label of v): what v comes
  /// back as in SACKs and NACKs. A controller's EV gets this value, so the sender recognises it.
  std::uint32_t canonical_ev(std::uint32_t v) const {
    return ev_of_wire(sport_of(v), cfg_.ev_mode == EvMode::kStev ? flow_label_of(v) : 0);
  }

 private:
  struct SendSock {
    int fd = -1;
    std::uint16_t sport = 0;
    std::uint64_t packets = 0;
  };
  struct TxSlot {
    engine::TxPacket pkt;
    std::int32_t sock = -1;  ///< index into Plane::socks
    sockaddr_in6 dst{};      ///< also holds a sockaddr_in
    socklen_t dst_len = 0;
    std::uint8_t ip6udp[48];  ///< SRv6 mode: the IPv6 + UDP header built here (iov[0])
    iovec iov[4];             ///< [ip6udp,] header, payload, trailer
    std::uint8_t iov_first = 1, iov_count = 2;
  };
  struct Plane {
    IpAddr addr;
    int rx_fd = -1;
    int ifindex = 0;            ///< 0: not watched
    bool link_up = true;        ///< as last reported by the kernel
    bool link_suspect = false;  ///< a send failed as if the link were down: ask the kernel
    Time next_link_query = 0;
    std::vector<std::int32_t> sock_of_sport;  ///< sport -> index into socks; -1 none, -2 failed
    std::vector<SendSock> socks;
    std::vector<TxSlot> batch;
    std::uint32_t count = 0;
    std::vector<mmsghdr> tx_mm;  ///< scratch: one socket's run of the batch
    std::vector<std::uint8_t> done;
    std::vector<std::uint32_t> tx_segments;  ///< scratch: packets in each tx_mm message
    std::vector<iovec> gso_iov;              ///< scratch: the iovecs of GSO messages, back to back
    std::vector<std::uint8_t> gso_cmsg;      ///< scratch: one UDP_SEGMENT cmsg per message
    // receive
    std::vector<std::uint8_t> rx_buf;
    std::vector<mmsghdr> rx_mm;
    std::vector<iovec> rx_iov;
    std::vector<sockaddr_in6> rx_names;
    std::vector<std::uint8_t> rx_cmsg;
  };
  struct Peer {
    std::vector<IpAddr> addrs;
    std::vector<sockaddr_in6> dst;  ///< per plane, port 4791
    std::vector<socklen_t> dst_len;
    std::vector<sockaddr_in6> carriers;  ///< SRv6: [plane * paths + path], port 0 (raw socket)
  };
  enum class CmdType : std::uint8_t { kSend, kRecv };
  struct Cmd {
    CmdType type = CmdType::kSend;
    std::uint32_t qpn = 0;
    engine::SendWr wr;
  };

  explicit UdpEndpoint(const UdpConfig& cfg);
  bool open(std::string& err);
  std::size_t run_once(Duration timeout);
  /// Before taking the engine lock for a round: lets waiting execute() calls go first.
  void yield_to_control();
  std::size_t receive_plane(std::uint32_t plane, Time now);
  void deliver(std::span<const std::uint8_t> pkt, const engine::RxMeta& meta, Time now);
  /// Fills tx_mm from `first` on with the batch's packets for socket `sock`, merging runs to one
  /// destination into GSO messages when enabled. Returns the number of messages.
  std::uint32_t gather(Plane& p, std::uint32_t first, std::int32_t sock);
  std::size_t transmit(Time now);
  void enqueue(const engine::TxPacket& pkt);
  void flush(std::uint32_t plane);
  /// SRv6 mode: the carrier destination and the IPv6 + UDP header of a slot (iov[0]).
  void build_srv6(TxSlot& s, std::uint32_t plane, const Peer& peer, std::uint16_t sport);
  bool check_srv6(std::string& err) const;
  /// "" or why `paths` cannot be SRv6 paths under block_bits.
  std::string check_srv6_paths(const std::vector<std::vector<std::uint16_t>>& paths) const;
  /// The carriers of a peer at `addrs` for every (plane, path); false when one does not fit.
  bool build_carriers(const std::vector<IpAddr>& addrs, const std::vector<std::vector<std::uint16_t>>& paths,
                      std::vector<sockaddr_in6>& out) const;
  std::int32_t send_socket(std::uint32_t plane, std::uint16_t sport);
  /// Posts c to the engine: 0, or its errno; a QP in ERROR takes it and completes it flushed.
  int apply_cmd(const Cmd& c, Time now);
  void complete_cmd(const Cmd& c, engine::WcStatus status);
  /// post_send / post_recv: applied at once without the progress thread, else queued to it.
  int post(const Cmd& c);
  void drain_commands(Time now);
  void export_completions();
  void thread_main();
  void wake();
  bool open_link_watch(std::string& err);
  void request_link(int ifindex);
  void read_links(Time now);
  void query_suspect_links(Time now);
  std::uint32_t lookup_peer(std::uint32_t plane, const sockaddr_in6& src) const;
  /// What folds RoCEv2's masked IP/UDP headers of a datagram (addresses in network order, IPv4 ID 0)
  /// into the engine's ICRC of its `mrc_len` bytes (BTH .. ICRC): wire::icrc_prefix_xor.
  std::uint32_t icrc_xor(const std::uint8_t* src, const std::uint8_t* dst, std::uint16_t sport,
                         std::uint16_t dport, std::size_t mrc_len) const;

  /// A peer's address on one plane (IPv4 in the first 4 bytes, the rest zero).
  struct PeerKey {
    std::uint32_t plane;
    std::array<std::uint8_t, 16> addr;
    friend bool operator==(const PeerKey&, const PeerKey&) = default;
  };
  struct PeerKeyHash {
    std::size_t operator()(const PeerKey& k) const noexcept;
  };
  static PeerKey peer_key(std::uint32_t plane, const IpAddr& a);

  UdpConfig cfg_;
  int family_ = AF_INET;
  bool rocev2_icrc_ = false;  ///< cfg_.rocev2_icrc && cfg_.engine.icrc
  std::unique_ptr<engine::Endpoint> ep_;
  std::vector<Plane> planes_;
  std::vector<PlaneCounters> plane_ctr_;
  std::vector<Peer> peers_;
  /// (plane, address) -> peer id, the latest registration of an address winning: the per-datagram
  /// source check and peer_at.
  std::unordered_map<PeerKey, std::uint32_t, PeerKeyHash> peer_ids_;
  Impairment impair_;
  int epfd_ = -1;
  int evfd_ = -1;
  int nlfd_ = -1;  ///< rtnetlink, RTMGRP_LINK
  std::vector<std::uint8_t> nl_buf_;
  Time next_link_read_ = 0;
  bool links_suspect_ = false;
  engine::TxPacket staging_;
  std::uint64_t cmd_refused_ = 0;
  std::uint32_t free_mask_ = 0;
  PcapWriter* pcap_ = nullptr;
  void capture(const IpAddr& src, std::uint16_t sport, const IpAddr& dst, std::uint16_t dport,
               std::uint32_t flow, int tos, std::span<const std::uint8_t> h, std::span<const std::uint8_t> pl,
               std::span<const std::uint8_t> tr);  ///< planes whose batch has room

  // progress context
  std::thread thread_;  ///< after start(): runs the rounds
  std::atomic<bool> threaded_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};  ///< a round waits in epoll: wake() writes the eventfd
  MpscRing<Cmd> cmds_;
  bool have_pending_cmd_ = false;
  Cmd pending_cmd_;
  SpscRing<engine::Completion> completions_;
  SpscRing<engine::Event> events_;
  /// Held by a round (not while it sleeps) or an execute(): the engine's owner.
  std::mutex engine_mu_;
  std::atomic<int> exec_waiting_{0};  ///< execute() calls waiting for engine_mu_
  std::mutex exec_mu_;                ///< with exec_cv_: a round waiting for them
  std::condition_variable exec_cv_;
  std::function<void(engine::Endpoint&)> export_hook_;
};

}  // namespace mrc::io
