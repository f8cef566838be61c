// UdpEndpoint progress: one round of receive, timers and transmit; the command and completion
// rings; execute(); the progress thread's start() / stop(). One concurrency model whoever drives
// it (udp_endpoint.hpp, "Progress").
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>

#include "io/udp_common.hpp"
#include "io/udp_endpoint.hpp"

namespace mrc::io {

using namespace detail;

namespace {
/// The endpoint whose engine this thread holds (inside a round or an execute()): a control call
/// made from there (a hook, a callback) runs at once instead of waiting for itself.
thread_local const UdpEndpoint* t_holder = nullptr;
struct Holder {
  const UdpEndpoint* prev;
  explicit Holder(const UdpEndpoint* ep) : prev(t_holder) { t_holder = ep; }
  ~Holder() { t_holder = prev; }
  Holder(const Holder&) = delete;
  Holder& operator=(const Holder&) = delete;
};
}  // namespace

void UdpEndpoint::yield_to_control() {
  if (exec_waiting_.load(std::memory_order_acquire) == 0) return;
  std::unique_lock<std::mutex> lk(exec_mu_);
  exec_cv_.wait(lk, [&] { return exec_waiting_.load(std::memory_order_acquire) == 0; });
}

std::size_t UdpEndpoint::run_once(Duration timeout) {
  yield_to_control();
  std::unique_lock<std::mutex> hold(engine_mu_);
  std::size_t work = 0;
  Time t = now();
  {
    Holder h(this);
    drain_commands(t);
    for (std::uint32_t i = 0; i < planes_.size(); ++i) {
      for (int r = 0; r < kRxRoundsPerPlane; ++r) {
        const std::size_t n = receive_plane(i, t);
        work += n;
        if (n < cfg_.rx_batch) break;
      }
    }
    if (impair_.held() != 0) {
      impair_.release(t, [&](std::span<const std::uint8_t> b, const engine::RxMeta& m) { deliver(b, m, t); });
    }
    t = now();
    if (t >= ep_->next_deadline()) ep_->on_timer(t);
    // Before transmit, so a plane found down this round gets no more packets.
    if (links_suspect_) query_suspect_links(t);
    if (t >= next_link_read_) {
      read_links(t);
      next_link_read_ = t + kLinkReadPeriod;
    }
    work += transmit(t);
    export_completions();
  }
  if (work != 0 || timeout == 0) return work;

  Duration wait = timeout;
  const Time dl = std::min(ep_->next_deadline(), impair_.next_release());
  if (dl != kNever) wait = dl <= t ? 0 : std::min<Duration>(wait, dl - t);
  // Whoever queues a command or wants the engine after this point writes the eventfd (wake()).
  sleeping_.store(true, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (cmds_.ready() || have_pending_cmd_ || exec_waiting_.load() != 0 || stop_.load()) wait = 0;
  hold.unlock();  // control calls run while we sleep
  if (wait > 0) {
    timespec ts{static_cast<time_t>(wait / 1'000'000'000ull), static_cast<long>(wait % 1'000'000'000ull)};
    epoll_event evs[8];
    const int n = ::epoll_pwait2(epfd_, evs, 8, &ts, nullptr);
    for (int i = 0; i < n; ++i) {
      if (evs[i].data.u32 == kEventFdTag) {
        std::uint64_t v = 0;
        (void)!::read(evfd_, &v, sizeof v);
      } else if (evs[i].data.u32 == kNetlinkTag) {
        yield_to_control();
        std::lock_guard<std::mutex> lk(engine_mu_);  // a link change reaches the engine
        Holder h(this);
        read_links(now());
      }
    }
  }
  sleeping_.store(false, std::memory_order_relaxed);
  return 0;
}

std::size_t UdpEndpoint::progress(Duration timeout) {
  if (threaded_.load(std::memory_order_relaxed)) return 0;
  return run_once(timeout);
}

void UdpEndpoint::complete_cmd(const Cmd& c, engine::WcStatus status) {
  engine::Completion cp;
  cp.wr_id = c.wr.wr_id;
  cp.qpn = c.qpn;
  cp.status = status;
  cp.is_recv = c.type == CmdType::kRecv;
  cp.opcode = cp.is_recv ? engine::WcOpcode::kRecvRdmaWithImm
                         : (c.wr.with_imm ? engine::WcOpcode::kRdmaWriteImm : engine::WcOpcode::kRdmaWrite);
  ep_->push_completion(cp);
}

int UdpEndpoint::apply_cmd(const Cmd& c, Time now_ns) {
  const int rc =
      c.type == CmdType::kSend ? ep_->post_send(c.qpn, c.wr, now_ns) : ep_->post_recv(c.qpn, c.wr.wr_id);
  if (rc == 0 || rc == ENOMEM || ep_->qp_state(c.qpn) != engine::QpState::kError) return rc;
  // Verbs: a WR posted to a QP in ERROR is accepted and completes flushed (IBV_WC_WR_FLUSH_ERR),
  // after the flushes of the WRs it held when it failed (the engine queued those first).
  complete_cmd(c, engine::WcStatus::kFlushed);
  return 0;
}

void UdpEndpoint::drain_commands(Time now_ns) {
  auto apply = [&](const Cmd& c) {
    const int rc = apply_cmd(c, now_ns);
    if (rc == ENOMEM) return false;  // queue full: retry later, keeping the order
    if (rc != 0) {
      ++cmd_refused_;
      complete_cmd(c, engine::WcStatus::kLocalProtectionError);
    }
    return true;
  };
  if (have_pending_cmd_) {
    if (!apply(pending_cmd_)) return;
    have_pending_cmd_ = false;
  }
  while (cmds_.pop(pending_cmd_)) {
    if (!apply(pending_cmd_)) {
      have_pending_cmd_ = true;
      return;
    }
  }
}

void UdpEndpoint::export_completions() {
  if (export_hook_) {  // the consumer drains the engine itself
    export_hook_(*ep_);
    return;
  }
  engine::Completion c;
  while (!completions_.full() && ep_->poll_completion(c)) completions_.push(c);
  engine::Event e;
  while (!events_.full() && ep_->poll_event(e)) events_.push(e);
}

void UdpEndpoint::wake() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    const std::uint64_t one = 1;
    (void)!::write(evfd_, &one, sizeof one);
  }
}

int UdpEndpoint::post(const Cmd& c) {
  if (!cmds_.push(c)) return EAGAIN;
  wake();
  return 0;
}

int UdpEndpoint::post_send(std::uint32_t qpn, const engine::SendWr& wr) {
  Cmd c;
  c.type = CmdType::kSend;
  c.qpn = qpn;
  c.wr = wr;
  return post(c);
}

int UdpEndpoint::post_recv(std::uint32_t qpn, std::uint64_t wr_id) {
  Cmd c;
  c.type = CmdType::kRecv;
  c.qpn = qpn;
  c.wr.wr_id = wr_id;
  return post(c);
}

bool UdpEndpoint::poll_completion(engine::Completion& out) {
  return completions_.pop(out);
}

bool UdpEndpoint::poll_event(engine::Event& out) {
  return events_.pop(out);
}

void UdpEndpoint::execute(const std::function<void(engine::Endpoint&)>& fn) {
  if (t_holder == this) {  // called back from inside a round or an execute()
    fn(*ep_);
    return;
  }
  exec_waiting_.fetch_add(1, std::memory_order_acq_rel);  // the next round waits for us
  {
    std::lock_guard<std::mutex> lk(engine_mu_);
    Holder h(this);
    const Time t = now();
    drain_commands(t);  // work requests posted before this call take effect before it
    fn(*ep_);
    export_completions();
  }
  {
    std::lock_guard<std::mutex> lk(exec_mu_);
    exec_waiting_.fetch_sub(1, std::memory_order_acq_rel);
  }
  exec_cv_.notify_all();
  wake();  // fn may have made work or an earlier deadline for a sleeping round
}

bool UdpEndpoint::start() {
  if (threaded_.exchange(true)) return false;
  stop_.store(false);
  thread_ = std::thread([this] { thread_main(); });
  return true;
}

void UdpEndpoint::stop() {
  if (!threaded_.load()) return;
  stop_.store(true);
  const std::uint64_t one = 1;
  (void)!::write(evfd_, &one, sizeof one);
  thread_.join();
  threaded_.store(false);
}

void UdpEndpoint::thread_main() {
  while (!stop_.load(std::memory_order_relaxed)) run_once(kThreadIdleWait);
  run_once(0);  // what was posted before stop() takes effect
}

}  // namespace mrc::io
