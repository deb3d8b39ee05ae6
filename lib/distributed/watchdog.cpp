#include "distributed/watchdog.hpp"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "core/floating_point.hpp"
#include "core/job_failure.hpp"
#include "core/log.hpp"
#include "distributed/mpi_check.hpp"
#include "distributed/shared_arena.hpp"
#include "distributed/world.hpp"

namespace sdp {

namespace {

std::string fixed1(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", v);
  return text;
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

std::string StallReport::message() const {
  std::string m = "rank " + std::to_string(rank) + " step " + std::to_string(step);
  if (bucket >= 0) m += " bucket " + std::to_string(bucket);
  m += ": " + what + " (collective #" + std::to_string(sequence) + ") has waited " + fixed1(waited_s) + " s";
  if (!missing_ranks.empty())
    m += "; rank(s) that never arrived: " + join(missing_ranks);
  else if (unchecked_nodes.empty())
    m += "; every rank has arrived (a peer may be stuck inside the collective)";
  if (!unchecked_nodes.empty()) {
    std::string hosts;
    for (std::size_t i = 0; i < unchecked_hosts.size(); ++i) hosts += (i ? "; " : "") + unchecked_hosts[i];
    m += std::string(missing_ranks.empty() ? "; every rank of this node arrived" : "") + "; ranks on node(s) " +
         join(unchecked_nodes) + (hosts.empty() ? std::string() : " (" + hosts + ")") +
         " cannot be inspected from here (unreachable or stuck: check their logs)";
  }
  return m;
}

// Lock-free 64-bit atomics are address-free, so they work across processes that map the
// same memory. `entered` is stored last with release order: a reader that sees it (acquire)
// also sees the step and bucket of that collective.
struct ProgressBoard::Slot {
  std::atomic<int64_t> entered;
  std::atomic<int64_t> step;
  std::atomic<int64_t> bucket;
};
static_assert(std::atomic<int64_t>::is_always_lock_free, "the progress board needs lock-free 64-bit atomics");

std::shared_ptr<ProgressBoard> ProgressBoard::create(const World& world) {
  auto board = std::make_shared<ProgressBoard>();
  board->nodes_ = world.nodes();
  board->node_ = world.node();
  board->world_ranks_.resize(world.local_size());
  int me = world.rank();
  SDP_MPI_CHECK(MPI_Allgather(&me, 1, MPI_INT, board->world_ranks_.data(), 1, MPI_INT, world.intra()));
  // Every node's host and ranks, as a report names them.
  for (int n = 0; n < world.nodes(); ++n) {
    std::vector<int> ranks;
    for (int r = 0; r < world.size(); ++r)
      if (world.rank_nodes()[static_cast<std::size_t>(r)] == n) ranks.push_back(r);
    board->node_labels_.push_back(world.node_names()[static_cast<std::size_t>(n)] + ": rank(s) " + join(ranks));
  }
  board->arena_ = SharedArena::create(world.intra(), sizeof(Slot));
  new (board->arena_->data()) Slot{{0}, {0}, {-1}};
  board->arena_->sync();  // every slot initialized before anyone reads one
  return board;
}

ProgressBoard::Slot* ProgressBoard::slot(int local_rank) const {
  return static_cast<Slot*>(arena_->peer_data(local_rank));
}

void ProgressBoard::publish(int64_t entered, int64_t step, int bucket) {
  Slot* mine = slot(arena_->local_rank());
  mine->step.store(step, std::memory_order_relaxed);
  mine->bucket.store(bucket, std::memory_order_relaxed);
  mine->entered.store(entered, std::memory_order_release);
}

std::vector<int> ProgressBoard::behind(int64_t sequence) const {
  std::vector<int> out;
  for (int r = 0; r < arena_->local_size(); ++r)
    if (slot(r)->entered.load(std::memory_order_acquire) < sequence) out.push_back(world_ranks_[r]);
  return out;
}

Watchdog::Watchdog(WatchdogOptions options, int rank, std::shared_ptr<ProgressBoard> board, Handler on_warning,
                   Handler on_timeout)
    : options_(options),
      rank_(rank),
      board_(std::move(board)),
      on_warning_(std::move(on_warning)),
      on_timeout_(std::move(on_timeout)) {
  if (!on_warning_) on_warning_ = [](const StallReport& r) { log_warn(r.message()); };
  if (!on_timeout_) {
    const double timeout = options_.timeout_s;
    on_timeout_ = [timeout](const StallReport& r) { abort_on_timeout(r, timeout); };
  }
  // Poll often enough to be within ~5% of either limit (at most every second).
  double shortest = 1.0;
  for (double limit : {options_.stall_warning_s, options_.timeout_s})
    if (limit > 0) shortest = std::min(shortest, limit / 20);
  poll_period_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(std::max(shortest, 0.001)));
}

WatchTicket Watchdog::issue(int64_t step, int bucket, const char* what) {
  WatchTicket ticket;
  ticket.sequence = ++issued_;
  ticket.step = step;
  ticket.bucket = bucket;
  ticket.what = what;
  ticket.issued = std::chrono::steady_clock::now();
  // Peers only read this when THEY are stalled.
  if (board_) board_->publish(ticket.sequence, step, bucket);
  return ticket;
}

void Watchdog::wait(Work& work, const WatchTicket& ticket) {
  double next_warning_s = options_.stall_warning_s;
  bool timed_out = false;
  while (!work.wait(poll_period_)) {
    if (timed_out) continue;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - ticket.issued).count();
    if (options_.timeout_s > 0 && waited >= options_.timeout_s) {
      timed_out = true;
      on_timeout_(report(ticket, waited));
    } else if (options_.stall_warning_s > 0 && waited >= next_warning_s) {
      // The next warning one period later, even if this poll came late.
      while (next_warning_s <= waited) next_warning_s += options_.stall_warning_s;
      on_warning_(report(ticket, waited));
    }
  }
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    stopping_ = true;
  }
  watch_cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
}

void Watchdog::watch(int64_t step, const char* what, const std::function<void()>& call) {
  const WatchTicket ticket = issue(step, -1, what);
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    if (!monitor_.joinable()) monitor_ = start_thread([this] { monitor(); });
    watched_ = ticket;
    ++watch_generation_;
    watching_ = true;
  }
  struct Done {
    Watchdog* self;
    ~Done() {
      std::lock_guard<std::mutex> lock(self->watch_mu_);
      self->watching_ = false;
    }
  } done{this};
  call();
}

void Watchdog::monitor() {
  // Per watched collective (generation): when the next warning is due, whether it timed out.
  int64_t generation = -1;
  double next_warning_s = 0;
  bool timed_out = false;
  std::unique_lock<std::mutex> lock(watch_mu_);
  while (!stopping_) {
    watch_cv_.wait_for(lock, poll_period_);
    if (stopping_ || !watching_) continue;
    if (watch_generation_ != generation) {
      generation = watch_generation_;
      next_warning_s = options_.stall_warning_s;
      timed_out = false;
    }
    if (timed_out) continue;
    const WatchTicket ticket = watched_;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - ticket.issued).count();
    if (options_.timeout_s > 0 && waited >= options_.timeout_s) {
      timed_out = true;
      lock.unlock();  // the handler may take long (it aborts the job), watch() must not block on it
      on_timeout_(report(ticket, waited));
      lock.lock();
    } else if (options_.stall_warning_s > 0 && waited >= next_warning_s) {
      while (next_warning_s <= waited) next_warning_s += options_.stall_warning_s;
      lock.unlock();
      on_warning_(report(ticket, waited));
      lock.lock();
    }
  }
}

StallReport Watchdog::report(const WatchTicket& ticket, double waited_s) const {
  StallReport r;
  r.rank = rank_;
  r.step = ticket.step;
  r.bucket = ticket.bucket;
  r.what = ticket.what;
  r.waited_s = waited_s;
  r.sequence = ticket.sequence;
  if (board_) {
    r.missing_ranks = board_->behind(ticket.sequence);
    for (int n = 0; n < board_->nodes(); ++n)
      if (n != board_->node()) {
        r.unchecked_nodes.push_back(n);
        r.unchecked_hosts.push_back(board_->node_label(n));
      }
  }
  return r;
}

void abort_on_timeout(const StallReport& report, double timeout_s) {
  report_job_error(report.message() + "; aborting the job (distributed.timeout_s = " + fixed1(timeout_s) + ")");
  // Under MPI_THREAD_SERIALIZED another thread may be inside MPI right now; MPI_Abort from
  // here is the one exception we accept (the process ends either way), and _exit backs it up.
  abort_job(3);
}

}  // namespace sdp
