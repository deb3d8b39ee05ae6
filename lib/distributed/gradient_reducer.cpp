#include "distributed/gradient_reducer.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "core/clock.hpp"
#include "core/error.hpp"
#include "core/floating_point.hpp"
#include "core/parameter_store.hpp"

namespace sdp {

std::vector<ParamExtent> param_extents(const ParameterStore& store) {
  std::vector<ParamExtent> out;
  for (const Param& p : store.params()) out.push_back({p.offset, shape_numel(p.shape)});
  return out;
}

std::vector<GradientBucket> plan_buckets(int64_t arena_count, int64_t element_size,
                                         const std::vector<ParamExtent>& params, double bucket_mb,
                                         double first_bucket_mb) {
  std::vector<GradientBucket> buckets;
  const int n = static_cast<int>(params.size());
  if (n == 0) return buckets;
  for (int i = 1; i < n; ++i)
    if (params[i].offset < params[i - 1].offset + params[i - 1].count)
      throw std::logic_error("plan_buckets: parameters must be laid out in registration order");
  auto cap_bytes = [&](std::size_t k) {
    const double mb = (k == 0 && first_bucket_mb > 0) ? first_bucket_mb : bucket_mb;
    return mb <= 0 ? INT64_MAX : static_cast<int64_t>(mb * 1024 * 1024);
  };
  // Walk backward from the arena end; a bucket owns everything from its lowest parameter's
  // offset up to where the previous bucket began (so padding is covered too).
  int64_t end = arena_count;
  int hi = n - 1;
  int64_t bytes = 0;
  for (int i = n - 1; i >= 0; --i) {
    bytes += params[i].count * element_size;
    if (bytes >= cap_bytes(buckets.size()) || i == 0) {
      const int64_t begin = i == 0 ? 0 : params[i].offset;
      buckets.push_back({begin, end - begin, i, hi});
      end = begin;
      hi = i - 1;
      bytes = 0;
    }
  }
  return buckets;
}

GradientReducer::GradientReducer(CommBuffer arena, std::vector<ParamExtent> params,
                                 std::shared_ptr<AllreduceAlgorithm> algorithm, GradientReducerOptions options,
                                 Watchdog* watchdog)
    : arena_(arena),
      params_(std::move(params)),
      algorithm_(std::move(algorithm)),
      options_(options),
      watchdog_(watchdog) {
  buckets_ = plan_buckets(arena_.count, arena_.element_size(), params_, options_.bucket_mb, options_.first_bucket_mb);
  bucket_of_.assign(params_.size(), 0);
  for (std::size_t k = 0; k < buckets_.size(); ++k)
    for (int i = buckets_[k].first_param; i <= buckets_[k].last_param; ++i) bucket_of_[i] = static_cast<int>(k);
  pending_.resize(buckets_.size());
  param_ready_.assign(params_.size(), 0);
  ready_events_.assign(params_.size(), nullptr);
  reductions_.assign(buckets_.size(), 0);
  tickets_.resize(buckets_.size());
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    pending_[k] = buckets_[k].last_param - buckets_[k].first_param + 1;
    work_.push_back(std::make_unique<HostWork>());
  }
  thread_ = start_thread([this] { comm_loop(); });
}

GradientReducer::~GradientReducer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void GradientReducer::begin_step(int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_ = step;
}

void GradientReducer::on_grad_ready(int param_index, const Event* ready) {
  if (param_index < 0 || param_index >= static_cast<int>(params_.size()))
    throw std::logic_error("GradientReducer: no parameter " + std::to_string(param_index));
  std::lock_guard<std::mutex> lock(mutex_);
  if (param_ready_[param_index]) throw std::logic_error("GradientReducer: parameter " + std::to_string(param_index) +
                                                        " reported ready twice in one step");
  param_ready_[param_index] = 1;
  ready_events_[param_index] = ready;
  --pending_[bucket_of_[param_index]];
  if (compute_ != nullptr)
    start_ready_on_caller_locked();
  else if (options_.overlap)
    launch_ready_locked();
}

void GradientReducer::order_on_device(Stream& compute) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (next_launch_ != 0 || std::find(param_ready_.begin(), param_ready_.end(), 1) != param_ready_.end())
    throw std::logic_error("GradientReducer::order_on_device in the middle of a step");
  compute_ = &compute;
}

void GradientReducer::start_ready_on_caller_locked() {
  // Strictly in bucket order, as the communication thread would: every rank the same sequence.
  while (next_launch_ < static_cast<int>(buckets_.size()) && pending_[next_launch_] == 0) {
    const GradientBucket& b = buckets_[next_launch_];
    started_on_device_.push_back(algorithm_->run(arena_.slice(b.begin, b.count), options_.op, *compute_));
    ++reductions_[next_launch_++];
  }
}

void GradientReducer::join_on_device() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (compute_ == nullptr) throw std::logic_error("GradientReducer::join_on_device without order_on_device");
  std::fill(pending_.begin(), pending_.end(), 0);  // unused parameters: their zeros are reduced too
  start_ready_on_caller_locked();
  for (const std::shared_ptr<Work>& work : started_on_device_) work->block_stream(*compute_);
  started_on_device_.clear();
  last_.step = step_;
  last_.buckets = static_cast<int>(buckets_.size());
  last_.comm_s = 0.0;  // on the device: not timed from the host
  last_.exposed_s = 0.0;
  reset_step_locked(/*advance=*/true);
}

void GradientReducer::abandon_step() {
  std::lock_guard<std::mutex> lock(mutex_);
  started_on_device_.clear();
  reset_step_locked(/*advance=*/false);
}

void GradientReducer::reset_step_locked(bool advance) {
  comm_s_ = 0.0;
  comm_failed_ = false;
  next_launch_ = 0;
  if (advance) ++step_;
  std::fill(param_ready_.begin(), param_ready_.end(), 0);
  std::fill(ready_events_.begin(), ready_events_.end(), nullptr);
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    pending_[k] = buckets_[k].last_param - buckets_[k].first_param + 1;
    work_[k]->reset();
  }
}

void GradientReducer::launch_ready_locked() {
  // Strictly in bucket order, so every rank issues the same sequence of collectives.
  bool launched = false;
  while (next_launch_ < static_cast<int>(buckets_.size()) && pending_[next_launch_] == 0) {
    // The watchdog's clock starts here: queueing behind earlier buckets counts as waiting.
    if (watchdog_) tickets_[next_launch_] = watchdog_->issue(step_, next_launch_, "allreduce");
    queue_.push_back(next_launch_++);
    launched = true;
  }
  if (launched) cv_.notify_all();
}

void GradientReducer::issue_bucket(int k) {
  const GradientBucket& b = buckets_[k];
  for (int i = b.first_param; i <= b.last_param; ++i)
    if (ready_events_[i]) ready_events_[i]->synchronize();
  // The gradients are final now: the algorithm starts after nothing (host_stream()).
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<Work> work = algorithm_->run(arena_.slice(b.begin, b.count), options_.op, host_stream());
  in_flight_.push_back({k, start, std::move(work)});
}

void GradientReducer::finish_bucket(const InFlight& bucket) {
  const auto end = std::chrono::steady_clock::now();
  comm_s_ += std::chrono::duration<double>(end - bucket.start).count();
  ++reductions_[bucket.k];
  // step_ is stable here: wait_all moves it on only after every bucket's Work completed.
  if (options_.on_bucket_reduced)
    options_.on_bucket_reduced({step_, bucket.k, buckets_[bucket.k].count * arena_.element_size(), bucket.start, end});
}

bool GradientReducer::progress_in_flight(std::chrono::nanoseconds timeout) {
  InFlight& oldest = in_flight_.front();
  std::exception_ptr error;
  try {
    if (!oldest.work->wait(timeout)) return false;
    finish_bucket(oldest);
  } catch (...) {
    error = std::current_exception();
    comm_failed_ = true;
  }
  work_[oldest.k]->complete(error);
  in_flight_.pop_front();
  return true;
}

void GradientReducer::comm_loop() {
  // Host algorithms return complete Works: each bucket completes as soon as it was run. A
  // device bucket's Work completes later, on the device; the thread issues the next buckets
  // meanwhile (they pipeline on the communicators' streams) and completes them in order.
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (in_flight_.empty()) cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    if (queue_.empty()) {
      lock.unlock();
      progress_in_flight(std::chrono::microseconds(100));  // then look for new buckets again
      lock.lock();
      continue;
    }
    const int k = queue_.front();
    queue_.pop_front();
    lock.unlock();  // backward keeps reporting gradients while this bucket is on the wire
    if (comm_failed_) {  // after a failure the ranks are out of step: issue nothing more
      work_[k]->complete();
    } else {
      try {
        issue_bucket(k);
        while (!in_flight_.empty() && progress_in_flight(std::chrono::nanoseconds(0))) {
        }
      } catch (...) {
        comm_failed_ = true;
        work_[k]->complete(std::current_exception());
      }
    }
    lock.lock();
  }
}

void GradientReducer::wait_bucket(int k) {
  if (watchdog_)
    watchdog_->wait(*work_[k], tickets_[k]);
  else
    work_[k]->wait();
}

void GradientReducer::wait_all() {
  if (compute_ != nullptr) throw std::logic_error("GradientReducer::wait_all after order_on_device: join_on_device");
  const auto t0 = std::chrono::steady_clock::now();
  const int total = static_cast<int>(buckets_.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Buckets with parameters that never reported (unused this step) are reduced now: the
    // other ranks reduce them too, and an unused gradient is zero.
    std::fill(pending_.begin(), pending_.end(), 0);
    launch_ready_locked();
  }
  // In bucket order: the first bucket that stalls is the one the watchdog names. Every
  // bucket is waited for, even after an error, so the communication thread is idle (and
  // owns no communicator) when this returns.
  std::exception_ptr error;
  for (int k = 0; k < total; ++k) {
    try {
      wait_bucket(k);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  // The buckets' Works completed after the comm thread's last writes: its counters are ours.
  last_.step = step_;
  last_.buckets = total;
  last_.comm_s = comm_s_;
  last_.exposed_s = seconds_since(t0);
  reset_step_locked(/*advance=*/true);  // ready for the next step
  if (error) std::rethrow_exception(error);
}

}  // namespace sdp
