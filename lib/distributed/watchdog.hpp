// Watchdog: turns a hung collective into a clear message and a prompt abort
// (docs/guides/failures.md; Horovod's stall inspector). It watches Work, not calls: a collective is issue()d when it
// starts (a host backend) or is enqueued (a device backend, where the call returns at once
// and timing it would say nothing), and the thread that needs its result waits through
// wait(work, ticket), which polls the Work (Work::wait with a short timeout, so a completion
// is seen at once) and checks the ticket's age between polls:
//   past stall_warning_s: on_warning (default: log_warn "rank R step S bucket B: allreduce
//     has waited 61.0 s ...", repeated every stall_warning_s);
//   past timeout_s: on_timeout, once (default: abort_on_timeout: print
//     "sdp-train: error: ..." and MPI_Abort(MPI_COMM_WORLD, 3): exit status 3).
// The polled Work must be safe to test from the waiting thread: a HostWork completed by the
// communication thread, or a device event (never an MPI request driven by another thread).
// Which ranks never arrived: every rank publishes how many collectives it has issued in a
// ProgressBoard, a tiny shared-memory window per node. A stalled rank compares: peers of
// its node behind it are named; ranks on other nodes cannot be read without their
// cooperation (a one-sided read of a stalled process may itself hang), so the message says
// so and names those nodes instead.
//
// Blocking collectives (the control plane's raw MPI calls, a blocking broadcast) have no Work
// to poll: watch(step, what, call) runs the call on the calling thread while the watchdog's
// monitor thread ages it the same way (waking every poll period; nothing per call but two
// uncontended locks), so no collective of the job can wait for ever.
//
// The watchdog never calls MPI, except MPI_Abort when the job is ending anyway: the MPI
// thread level stays SERIALIZED.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/communicator.hpp"

namespace sdp {

class SharedArena;
class World;

struct WatchdogOptions {
  double stall_warning_s = 60.0;  // distributed.stall_warning_s; <= 0: never warn
  double timeout_s = 600.0;       // distributed.timeout_s; <= 0: never abort
};

struct StallReport {
  int rank = 0;
  int64_t step = 0;
  int bucket = -1;         // -1: not a gradient bucket
  std::string what;        // "allreduce", "barrier", ...
  double waited_s = 0.0;
  int64_t sequence = 0;    // index of this collective among those this rank issued
  std::vector<int> missing_ranks;      // world ranks known not to have reached it
  std::vector<int> unchecked_nodes;    // nodes whose ranks could not be inspected
  std::vector<std::string> unchecked_hosts;  // each of them as "host: rank(s) 2, 3"
  // "rank 1 step 7 bucket 2: allreduce has waited 12.0 s; ranks that never arrived: 3"
  std::string message() const;
};

// One slot per rank of the node: (collectives issued, step, bucket), in shared memory.
class ProgressBoard {
 public:
  // Collective over the world (every rank calls it). Returns null when the ranks of a
  // node cannot share memory (then only "unknown" can be said about peers).
  static std::shared_ptr<ProgressBoard> create(const World& world);
  void publish(int64_t entered, int64_t step, int bucket);
  // World ranks on my node whose `entered` count is below `sequence`.
  std::vector<int> behind(int64_t sequence) const;
  int nodes() const { return nodes_; }
  int node() const { return node_; }
  // Node `n` as a report names it: "sdp-h2: rank(s) 2, 3".
  const std::string& node_label(int n) const { return node_labels_[static_cast<std::size_t>(n)]; }

 private:
  struct Slot;
  Slot* slot(int local_rank) const;
  std::shared_ptr<SharedArena> arena_;
  std::vector<int> world_ranks_;  // by local rank
  std::vector<std::string> node_labels_;  // by node
  int nodes_ = 1, node_ = 0;
};

// A collective as the watchdog knows it: which one, and when it was issued.
struct WatchTicket {
  int64_t sequence = 0;  // 1 for the first collective this rank issued
  int64_t step = 0;
  int bucket = -1;
  const char* what = "";  // a string literal: "allreduce", "barrier", ...
  std::chrono::steady_clock::time_point issued;
};

class Watchdog {
 public:
  using Handler = std::function<void(const StallReport&)>;

  // `board` may be null. Empty handlers mean the defaults (log_warn / abort_on_timeout).
  Watchdog(WatchdogOptions options, int rank, std::shared_ptr<ProgressBoard> board = nullptr,
           Handler on_warning = {}, Handler on_timeout = {});
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // A collective starts (or is enqueued) now. Every rank issues the same collectives in the
  // same order (their sequence numbers must agree); one thread at a time issues.
  WatchTicket issue(int64_t step, int bucket, const char* what);
  // Returns once `work` is complete (rethrowing its error), reporting a stall as the ticket
  // ages. After a timeout whose handler returns (tests), it keeps waiting, silent.
  void wait(Work& work, const WatchTicket& ticket);
  // Issues a collective named `what` (a string literal: "evaluation allreduce", ...) and runs
  // `call`, which performs it blocking, while the monitor thread reports a stall as wait()
  // does. Exceptions from `call` propagate.
  void watch(int64_t step, const char* what, const std::function<void()>& call);
  // How long one poll waits: ~5% of the shorter limit, at most 1 s, at least 1 ms.
  std::chrono::nanoseconds poll_period() const { return poll_period_; }

 private:
  StallReport report(const WatchTicket& ticket, double waited_s) const;
  void monitor();  // the thread behind watch()
  WatchdogOptions options_;
  int rank_;
  std::shared_ptr<ProgressBoard> board_;
  Handler on_warning_, on_timeout_;
  std::chrono::nanoseconds poll_period_;
  std::atomic<int64_t> issued_{0};
  // watch(): the blocking collective in progress (generation counts them), under watch_mu_.
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  WatchTicket watched_;
  int64_t watch_generation_ = 0;
  bool watching_ = false, stopping_ = false;
  std::thread monitor_;  // started by the first watch()
};

// watchdog->watch(step, what, call), or just call() where nothing watches (watchdog null).
inline void run_watched(Watchdog* watchdog, int64_t step, const char* what, const std::function<void()>& call) {
  if (watchdog != nullptr)
    watchdog->watch(step, what, call);
  else
    call();
}

// Default timeout handler: prints "sdp-train: error: <report>; aborting (distributed.timeout_s
// = T)" and ends the whole job with MPI_Abort(MPI_COMM_WORLD, 3) (exit status 3); falls back
// to _exit(3) if MPI cannot abort.
[[noreturn]] void abort_on_timeout(const StallReport& report, double timeout_s);

}  // namespace sdp
