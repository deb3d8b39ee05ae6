// GradientReducer: bucketed gradient AllReduce overlapped with backward (PyTorch DDP's
// Reducer, Horovod's tensor fusion), without copies: a bucket is a slice of the gradient
// arena itself.
//
// Buckets: parameters are taken in REVERSE registration order (the order backward
// finishes them) and grouped until a bucket holds bucket_mb (first_bucket_mb for the first,
// so communication starts early); bucket_mb = 0 makes one bucket. The buckets tile the
// arena (padding between parameters included), so one step reduces every byte exactly once.
//
// Per step (the training loop, one thread):
//   begin_step(step)            optional; names the step for the watchdog
//   on_grad_ready(i[, event])   from backward, as parameter i's gradient becomes final
//                               (event: grad_ready.hpp; none = already written, host)
//   wait_all()                  before the optimizer; reduces what is not started yet
// A bucket whose parameters are all ready is issued at once, in bucket order: bucket k
// starts only after buckets 0..k-1 (every rank must issue the collectives in the same order,
// whatever order its hooks fire in). Each bucket has a Work (a HostWork, reused every step:
// no allocation per bucket) that the communication thread completes; wait_all waits on them
// in bucket order through the watchdog, which polls them and reports a bucket that stalls.
//
// The communication thread runs the AllreduceAlgorithm (blocking on host backends: MPI's
// blocking collectives are its fastest). Device buffers (NCCL): the thread waits for the
// bucket's gradient events, starts the algorithm (its phases chain on the communicators'
// streams: allreduce.hpp), and goes on to the next bucket while the device works, so buckets
// pipeline; it completes each bucket's Work, in order, when the device's Work is.
//
// Stream-ordered (order_on_device, distributed.stream_ordered): no communication thread work
// and no host wait; the reporting thread starts each bucket, ordered on the device after the
// gradient, and join_on_device replaces wait_all (see there).
//
// Thread level: the communication thread is the only one driving the communicators between
// the first on_grad_ready and wait_all's return; the training loop must not use them (nor
// MPI) in that window. Under MPI that is MPI_THREAD_SERIALIZED (MpiCommunicator checks it),
// which Open MPI serves without the locking cost of MPI_THREAD_MULTIPLE; the hand-over
// through the reducer's mutex and the buckets' Works gives the happens-before the standard
// asks of SERIALIZED callers.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "distributed/allreduce.hpp"
#include "distributed/communicator.hpp"
#include "distributed/grad_ready.hpp"
#include "distributed/host_work.hpp"
#include "distributed/watchdog.hpp"

namespace sdp {

class ParameterStore;

// Where parameter i's gradient lives in the arena (elements).
struct ParamExtent {
  int64_t offset = 0;
  int64_t count = 0;
};
// The extents of a ParameterStore's parameters, in registration order.
std::vector<ParamExtent> param_extents(const ParameterStore& store);

struct GradientBucket {
  int64_t begin = 0;  // element offset in the arena
  int64_t count = 0;
  int first_param = 0;  // lowest registration index in the bucket
  int last_param = 0;   // highest (bucket k holds params last_param down to first_param)
};

// One bucket's AllReduce as it ran, for a timeline (obs/timeline.hpp).
struct BucketReduction {
  int64_t step = 0;
  int bucket = 0;
  int64_t bytes = 0;  // the bucket's gradient bytes (before any wire compression)
  std::chrono::steady_clock::time_point start, end;
};

struct GradientReducerOptions {
  double bucket_mb = 25.0;       // distributed.bucket_mb; 0 = one bucket
  double first_bucket_mb = 0.0;  // PyTorch uses 1; 0 = bucket_mb
  ReduceOp op = ReduceOp::kAvg;
  bool overlap = true;  // false: buckets start only in wait_all (no overlap with backward)
  // Called on the communication thread after each bucket's AllReduce; must not block or
  // throw. Empty (the default): not called, and nothing is timed for it.
  std::function<void(const BucketReduction&)> on_bucket_reduced;
};

struct ReducerStepStats {
  int64_t step = 0;
  int buckets = 0;
  double comm_s = 0.0;     // sum of the buckets' AllReduce times
  double exposed_s = 0.0;  // time wait_all blocked: communication not hidden by backward
};

// Bucket plan alone (pure function; the reducer uses it, tests check it).
std::vector<GradientBucket> plan_buckets(int64_t arena_count, int64_t element_size,
                                         const std::vector<ParamExtent>& params, double bucket_mb,
                                         double first_bucket_mb = 0.0);

class GradientReducer {
 public:
  // `arena`: the whole gradient arena; `params` in registration order. `algorithm` and
  // `watchdog` (optional) must outlive the reducer.
  GradientReducer(CommBuffer arena, std::vector<ParamExtent> params, std::shared_ptr<AllreduceAlgorithm> algorithm,
                  GradientReducerOptions options = {}, Watchdog* watchdog = nullptr);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  int bucket_of(int param_index) const { return bucket_of_[param_index]; }

  void begin_step(int64_t step);
  // `ready` (optional) must stay valid until wait_all returns (see grad_ready.hpp).
  void on_grad_ready(int param_index, const Event* ready = nullptr);
  // Blocks until every bucket of this step is reduced; rethrows a communication error.
  // Afterwards the reducer is ready for the next step (step + 1).
  void wait_all();

  // Stream-ordered reduction (distributed.stream_ordered; a step's collectives recordable in its
  // CUDA graph). From here on a bucket whose gradients are all reported starts at once, on the
  // reporting thread, ordered after the work queued so far on `compute` (the gradient just
  // enqueued there), not by the communication thread waiting for the gradient's event; the
  // buckets still start in bucket order. join_on_device() then orders `compute` after every
  // bucket of the step: the host waits for none of them (the caller waits once, for the step's
  // end). For algorithms whose phases all run on device streams (NCCL); on a host stream the
  // same calls run host collectives on the reporting thread. Not with wait_all().
  void order_on_device(Stream& compute);
  bool ordered_on_device() const { return compute_ != nullptr; }
  // Starts the buckets not started yet (parameters unused this step reduce their zeros), orders
  // `compute` after all of the step's, and readies the next step (step + 1). No host wait: a
  // recording can hold it.
  void join_on_device();
  // Forgets the step's reports and started buckets without joining them, keeping its number: a
  // recording that failed midway, after which the step is launched again from its start.
  void abandon_step();

  const ReducerStepStats& last_step() const { return last_; }
  // Total number of bucket reductions run since construction, per bucket (for tests).
  const std::vector<int64_t>& reductions_per_bucket() const { return reductions_; }

 private:
  // A bucket whose algorithm was started and whose Work is not complete yet (device buffers).
  struct InFlight {
    int k = 0;
    std::chrono::steady_clock::time_point start;
    std::shared_ptr<Work> work;
  };
  void launch_ready_locked();
  // Communication thread: starts bucket k's algorithm (its Work joins in_flight_).
  void issue_bucket(int k);
  // Communication thread: completes the oldest in-flight bucket if its Work completes within
  // `timeout` (false: not yet); a failure completes it with the error.
  bool progress_in_flight(std::chrono::nanoseconds timeout);
  void finish_bucket(const InFlight& bucket);
  void comm_loop();
  void wait_bucket(int k);
  // order_on_device's: starts the ready buckets in order on the calling thread.
  void start_ready_on_caller_locked();
  // Clears the step's reports and bucket states; `advance`: for the next step.
  void reset_step_locked(bool advance);

  CommBuffer arena_;
  std::vector<ParamExtent> params_;
  std::shared_ptr<AllreduceAlgorithm> algorithm_;
  GradientReducerOptions options_;
  Watchdog* watchdog_;
  std::vector<GradientBucket> buckets_;
  std::vector<int> bucket_of_;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<int> pending_;        // per bucket: params not yet ready this step
  std::vector<char> param_ready_;   // per param, this step
  std::vector<const Event*> ready_events_;  // per param, this step (null: host)
  int next_launch_ = 0;             // buckets [0, next_launch_) handed to the comm thread
  std::deque<int> queue_;
  std::vector<std::unique_ptr<HostWork>> work_;  // per bucket, completed by the comm thread
  std::vector<WatchTicket> tickets_;             // per bucket, when it was issued this step
  std::deque<InFlight> in_flight_;  // comm thread only: started, in bucket order
  bool comm_failed_ = false;        // comm thread: a bucket failed this step, skip the rest
  bool stop_ = false;
  int64_t step_ = 0;
  double comm_s_ = 0.0;
  std::vector<int64_t> reductions_;
  Stream* compute_ = nullptr;                           // order_on_device's stream; null: the thread's way
  std::vector<std::shared_ptr<Work>> started_on_device_;  // this step's buckets, order_on_device
  ReducerStepStats last_;
  std::thread thread_;
};

}  // namespace sdp
