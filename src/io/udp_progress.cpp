// UdpEndpoint progress: one round of receive, timers and transmit; the command and completion rings
// and execute() of the progress thread; start() / stop().
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>

#include "io/udp_common.hpp"
#include "io/udp_endpoint.hpp"

namespace mrc::io {

using namespace detail;

std::size_t UdpEndpoint::run_once(Duration timeout, bool threaded) {
  std::unique_lock<std::mutex> direct(direct_mu_, std::defer_lock);
  if (!threaded) {
    direct.lock();                   // released before sleeping
    if (threaded_.load()) return 0;  // start() ran since progress() looked
  }
  std::size_t work = 0;
  Time t = now();
  if (threaded) {
    if (exec_pending_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lk(exec_mu_);
      if (exec_fn_ != nullptr && !exec_done_) {
        (*exec_fn_)(*ep_);
        exec_done_ = true;
        exec_pending_.store(false, std::memory_order_release);
      }
      exec_cv_.notify_all();
    }
    drain_commands(t);
  }
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
  if (threaded) export_completions();
  if (work != 0 || timeout == 0) return work;

  Duration wait = timeout;
  const Time dl = std::min(ep_->next_deadline(), impair_.next_release());
  if (dl != kNever) wait = dl <= t ? 0 : std::min<Duration>(wait, dl - t);
  if (!threaded) direct.unlock();
  if (threaded) {
    sleeping_.store(true, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (cmds_.ready() || have_pending_cmd_ || exec_pending_.load() || stop_.load()) wait = 0;
  }
  if (wait > 0) {
    timespec ts{static_cast<time_t>(wait / 1'000'000'000ull), static_cast<long>(wait % 1'000'000'000ull)};
    epoll_event evs[8];
    const int n = ::epoll_pwait2(epfd_, evs, 8, &ts, nullptr);
    if (!threaded) direct.lock();  // a link change reaches the engine
    for (int i = 0; i < n; ++i) {
      if (evs[i].data.u32 == kEventFdTag) {
        std::uint64_t v = 0;
        (void)!::read(evfd_, &v, sizeof v);
      } else if (evs[i].data.u32 == kNetlinkTag) {
        read_links(now());
      }
    }
  }
  if (threaded) sleeping_.store(false, std::memory_order_relaxed);
  return 0;
}

std::size_t UdpEndpoint::progress(Duration timeout) {
  if (threaded_.load(std::memory_order_relaxed)) return 0;
  return run_once(timeout, false);
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
  if (!threaded_.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lk(direct_mu_);
    if (!threaded_.load(std::memory_order_relaxed))
      return apply_cmd(c, now());  // start() flips it under the lock
  }
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
  if (completions_.pop(out)) return true;
  if (threaded_.load(std::memory_order_relaxed)) return false;
  std::lock_guard<std::mutex> lk(direct_mu_);
  return !threaded_.load(std::memory_order_relaxed) && ep_->poll_completion(out);
}

bool UdpEndpoint::poll_event(engine::Event& out) {
  if (events_.pop(out)) return true;
  if (threaded_.load(std::memory_order_relaxed)) return false;
  std::lock_guard<std::mutex> lk(direct_mu_);
  return !threaded_.load(std::memory_order_relaxed) && ep_->poll_event(out);
}

void UdpEndpoint::execute(const std::function<void(engine::Endpoint&)>& fn) {
  {
    // Checked under the lock: start() flips the mode under it too.
    std::lock_guard<std::mutex> lk(direct_mu_);
    if (!threaded_.load()) {
      fn(*ep_);
      return;
    }
  }
  std::unique_lock<std::mutex> lk(exec_mu_);
  exec_cv_.wait(lk, [&] { return exec_fn_ == nullptr; });
  exec_fn_ = &fn;
  exec_done_ = false;
  exec_pending_.store(true, std::memory_order_release);
  if (!threaded_.load()) {
    // stop() finished between our check and the post: nobody serves the request but us.
    std::lock_guard<std::mutex> d(direct_mu_);
    fn(*ep_);
    exec_done_ = true;
    exec_pending_.store(false, std::memory_order_release);
  }
  const std::uint64_t one = 1;
  (void)!::write(evfd_, &one, sizeof one);
  exec_cv_.wait(lk, [&] { return exec_done_; });
  exec_fn_ = nullptr;
  exec_cv_.notify_all();
}

bool UdpEndpoint::start() {
  std::lock_guard<std::mutex> lk(direct_mu_);
  if (threaded_.load()) return false;
  stop_.store(false);
  threaded_.store(true);
  thread_ = std::thread([this] { thread_main(); });
  return true;
}

void UdpEndpoint::stop() {
  if (!threaded_.load()) return;
  stop_.store(true);
  const std::uint64_t one = 1;
  (void)!::write(evfd_, &one, sizeof one);
  thread_.join();
  {
    std::lock_guard<std::mutex> d(direct_mu_);
    threaded_.store(false);
  }
  // A request posted to the thread after its last round is served here.
  std::lock_guard<std::mutex> lk(exec_mu_);
  if (exec_fn_ != nullptr && !exec_done_) {
    std::lock_guard<std::mutex> d(direct_mu_);
    (*exec_fn_)(*ep_);
    exec_done_ = true;
    exec_pending_.store(false, std::memory_order_release);
    exec_cv_.notify_all();
  }
}

void UdpEndpoint::thread_main() {
  while (!stop_.load(std::memory_order_relaxed)) run_once(kThreadIdleWait, true);
  drain_commands(now());
  export_completions();
}

}  // namespace mrc::io
