// CUDA/NCCL half of nccl_communicator.hpp (compiled only with SDP_HAVE_NCCL): the bootstrap
// over MPI, collectives enqueued on the communicator's stream, Works on CUDA events, abort.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/cuda_check_cuda.hpp"
#include "core/device_info.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/stream_cuda.hpp"
#include "distributed/agreement.hpp"
#include "distributed/mpi_check.hpp"
#include "distributed/communicator_factory.hpp"
#include "distributed/nccl_communicator.hpp"

// ncclCommInitRankConfig and non-blocking communicators: 2.14; ncclAvg, ncclBfloat16: 2.10.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "the NCCL communicator needs NCCL 2.14 or newer"
#endif

namespace sdp {

namespace {

// Where a checked call is written, for the message (the call, its error text, file and line).
struct CallSite {
  const char* call;
  const char* file;
  int line;
};
#define SDP_CALL_SITE(text) (CallSite{text, __FILE__, __LINE__})

std::string place(const CallSite& site) {
  const char* slash = std::strrchr(site.file, '/');
  return std::string(" [") + (slash ? slash + 1 : site.file) + ":" + std::to_string(site.line) +
         "]";
}

// "<where>: ncclAllReduce failed: unhandled cuda error (run with NCCL_DEBUG=INFO for details)
// (NCCL: <ncclGetLastError>) [file:line]". `where` names the communicator and the rank.
std::string nccl_failure(const std::string& where, ncclResult_t result, const CallSite& site,
                         ncclComm_t comm) {
  std::string message = where + ": " + site.call + " failed: " + ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);  // NCCL's own account of the last failure
  if (last != nullptr && *last != '\0') message += " (NCCL: " + std::string(last) + ")";
  return message + place(site);
}

// core's check_cuda, with the communicator and rank (`where`) and the call site in the message:
// "<where>: <call> [file:line] failed: <error name> (<description>)".
void check_cuda_at(cudaError_t status, const std::string& where, const CallSite& site) {
  if (status == cudaSuccess) return;
  check_cuda(status, (std::string(site.call) + place(site)).c_str(), where.c_str());
}
#define SDP_CUDA_CHECK(where, call) check_cuda_at((call), (where), SDP_CALL_SITE(#call))

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kF16:
      return ncclFloat16;
    case DType::kBF16:
      return ncclBfloat16;
  }
  throw std::logic_error("NcclCommunicator: unhandled DType");
}

// kAvg is NCCL's own average (ncclAvg): the scale by 1/size happens once, inside the reduction.
ncclRedOp_t nccl_op(ReduceOp op) {
  return op == ReduceOp::kAvg ? ncclAvg : ncclSum;
}

// Polling NCCL or the GPU: yield the core for the first 200 us (NCCL's launch thread and a
// small collective finish in tens of microseconds), then sleep briefly between polls so a
// long wait does not burn a core the data loader could use.
class Backoff {
 public:
  void pause() {
    if (std::chrono::steady_clock::now() - start_ < std::chrono::microseconds(200))
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Makes `ordinal` the calling thread's current device for a scope (CUDA's current device is
// per thread, and the communication thread is not the one that made the communicator).
// Events are created on the current device, so this must hold before cudaEventCreate.
class CurrentDevice {
 public:
  CurrentDevice(int ordinal, const std::string& where) : ordinal_(ordinal) {
    SDP_CUDA_CHECK(where, cudaGetDevice(&previous_));
    if (previous_ != ordinal_) SDP_CUDA_CHECK(where, cudaSetDevice(ordinal_));
  }
  ~CurrentDevice() {
    if (previous_ != ordinal_) cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int ordinal_;
  int previous_ = -1;
};

// The event a Work completes on. Collectives set it when they are enqueued; a batch of
// send/recv sets it when the batch is launched (see NcclState::flush), possibly from another
// thread than the one polling, hence atomic.
struct EventSlot {
  std::atomic<cudaEvent_t> event{nullptr};
  ~EventSlot() {
    if (cudaEvent_t e = event.load()) cudaEventDestroy(e);  // fine while pending: freed once done
  }
};

struct PendingP2p {
  bool sending;
  void* data;
  size_t count;
  ncclDataType_t type;
  int peer;
};

// What the communicator and its Works share: the NCCL communicator, its stream, and whether
// it was aborted. A Work keeps it alive, so a Work may outlive the communicator object.
//
// Locking: `mutex` guards comm, pending, busy and the abort state; every NCCL call on comm
// is made under it, and ncclCommAbort too, so abort() from the watchdog's thread never frees
// the communicator under a call in progress. The lock is never held across a wait: the
// communicator is non-blocking, so NCCL calls return at once, and settle() releases the
// lock between its polls (marking the communicator busy: no other NCCL call may be issued
// until the one in progress has settled).
class NcclState {
 public:
  NcclState(int rank, int size, int ordinal, std::string label)
      : rank_(rank),
        size_(size),
        ordinal_(ordinal),
        label_(std::move(label)),
        where_("NCCL communicator '" + label_ + "' (rank " + std::to_string(rank) + " of " +
               std::to_string(size) + ", cuda:" + std::to_string(ordinal) + ")") {}
  NcclState(const NcclState&) = delete;
  NcclState& operator=(const NcclState&) = delete;
  ~NcclState();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int ordinal() const { return ordinal_; }
  const std::string& label() const { return label_; }
  const std::string& where() const { return where_; }
  cudaStream_t stream() const { return stream_; }
  float* scratch() const { return scratch_; }
  bool aborted() const { return aborted_.load(); }

  // The stream, the barrier's scratch element and the NCCL communicator; throws (after
  // aborting whatever NCCL started) when NCCL fails or takes longer than timeout_s.
  void init(const ncclUniqueId& id, double timeout_s);

  // Enqueues `body(comm, stream)` (one NCCL call, or a group) after any send/recv still
  // pending, and returns the event recorded after it.
  template <typename Body>
  std::shared_ptr<EventSlot> enqueue(const CallSite& site, Body&& body) {
    CurrentDevice device(ordinal_, where_);
    std::unique_lock<std::mutex> lock(mutex_);
    wait_idle(lock, site.call);
    flush_locked(lock);
    settle(lock, body(comm_, stream_), site);
    auto slot = std::make_shared<EventSlot>();
    record(*slot);
    return slot;
  }
  // Queues a send or recv; its Work completes on the slot returned, shared by the batch.
  std::shared_ptr<EventSlot> post(const PendingP2p& op, const char* what);
  // Launches the pending send/recv batch, if any (a Work of it is being waited on).
  void flush();
  // Throws when the communicator was aborted or NCCL reports an asynchronous error (the
  // communicator is then aborted: nothing enqueued on it can be trusted to complete).
  void check_health(const char* what);
  void abort(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mutex_);
    abort_locked(reason);
  }

 private:
  void require_usable(const char* what) const;
  // Waits (lock released) until no call of another thread is settling; throws if aborted.
  void wait_idle(std::unique_lock<std::mutex>& lock, const char* what);
  void flush_locked(std::unique_lock<std::mutex>& lock);
  void record(EventSlot& slot);
  // A non-blocking communicator may answer ncclInProgress: NCCL's own thread is still
  // setting up (init, a first connection) or enqueuing. Until ncclCommGetAsyncError says
  // ncclSuccess nothing else may be issued on the communicator or its stream (NCCL docs,
  // "Fault Tolerance"), so poll it here; any error aborts the communicator and throws.
  void settle(std::unique_lock<std::mutex>& lock, ncclResult_t result, const CallSite& site,
              std::chrono::steady_clock::time_point deadline =
                  std::chrono::steady_clock::time_point::max());
  [[noreturn]] void fail_locked(const std::string& message, bool timeout = false);
  void abort_locked(const std::string& reason);

  const int rank_, size_, ordinal_;
  const std::string label_, where_;
  cudaStream_t stream_ = nullptr;
  float* scratch_ = nullptr;
  std::mutex mutex_;
  ncclComm_t comm_ = nullptr;  // null once aborted
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;
  std::vector<PendingP2p> pending_;
  std::shared_ptr<EventSlot> pending_slot_;
  bool busy_ = false;  // settle() is polling a call, lock released
};

void NcclState::init(const ncclUniqueId& id, double timeout_s) {
  // The communicator's own stream, non-blocking so it never synchronizes with the legacy
  // default stream: compute on other streams overlaps communication, and ordering between
  // them is explicit (Work::block_stream, cudaStreamWaitEvent).
  SDP_CUDA_CHECK(where_, cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  SDP_CUDA_CHECK(where_, cudaMalloc(&scratch_, sizeof(float)));
  SDP_CUDA_CHECK(where_, cudaMemset(scratch_, 0, sizeof(float)));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  // Non-blocking: init returns at once and is polled below, so a rank that never arrives
  // costs timeout_s and a clear error, not a hang; no call blocks the host either (a first
  // connection to a peer, a full queue), so abort() always gets the lock. The price: NCCL
  // launches each call of a non-blocking communicator from a thread of its own (group.cc,
  // groupLaunchNonBlocking), tens of microseconds per call: small next to a gradient bucket.
  config.blocking = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  const ncclResult_t result = ncclCommInitRankConfig(&comm_, size_, id, rank_, &config);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s > 0 ? timeout_s : 1e9));
  settle(lock, result, SDP_CALL_SITE("ncclCommInitRankConfig"), deadline);
}

NcclState::~NcclState() {
  int previous = -1;
  cudaGetDevice(&previous);
  cudaSetDevice(ordinal_);
  if (!pending_.empty())
    log_warn(where_ + ": " + std::to_string(pending_.size()) +
             " send/recv never waited for were dropped");
  if (comm_ != nullptr) {
    // ncclCommDestroy waits for the communicator's operations; one that never completes (a
    // peer gone) would hang this destructor, so a busy or failed communicator is aborted.
    ncclResult_t async = ncclSuccess;
    const bool failed = ncclCommGetAsyncError(comm_, &async) != ncclSuccess ||
                        (async != ncclSuccess && async != ncclInProgress);
    const bool busy = stream_ != nullptr && cudaStreamQuery(stream_) != cudaSuccess;
    if (failed || busy) {
      log_warn(where_ + ": destroyed with " +
               (failed ? "an NCCL error" : "operations still running") + "; aborting it");
      ncclCommAbort(comm_);
    } else {
      ncclCommDestroy(comm_);  // a blocking call even on a non-blocking communicator (group.cc)
    }
    comm_ = nullptr;
  }
  cudaGetLastError();
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  if (previous >= 0 && previous != ordinal_) cudaSetDevice(previous);
  cudaGetLastError();  // whatever failed here is not the next caller's error
}

void NcclState::require_usable(const char* what) const {
  if (aborted_.load())
    throw RuntimeError(where_ + ": " + what + ": the communicator was aborted: " + abort_reason_);
}

void NcclState::settle(std::unique_lock<std::mutex>& lock, ncclResult_t result,
                       const CallSite& site, std::chrono::steady_clock::time_point deadline) {
  Backoff backoff;
  struct Busy {
    bool& flag;
    ~Busy() { flag = false; }  // runs with the lock held: every exit below holds it
  } busy{busy_};
  busy_ = true;
  while (result == ncclInProgress) {
    if (std::chrono::steady_clock::now() >= deadline)
      fail_locked(where_ + ": " + site.call +
                      " did not complete in time (a rank of the group may have failed " +
                      "or be unreachable; NCCL_DEBUG=INFO shows how far it got)" + place(site),
                  /*timeout=*/true);
    lock.unlock();  // let abort() and Work polls in between
    backoff.pause();
    lock.lock();
    require_usable(site.call);  // aborted meanwhile: comm_ is gone
    const ncclResult_t query = ncclCommGetAsyncError(comm_, &result);
    if (query != ncclSuccess) result = query;
  }
  if (result != ncclSuccess) fail_locked(nccl_failure(where_, result, site, comm_));
}

void NcclState::wait_idle(std::unique_lock<std::mutex>& lock, const char* what) {
  Backoff backoff;
  require_usable(what);
  while (busy_) {
    lock.unlock();
    backoff.pause();
    lock.lock();
    require_usable(what);
  }
}

void NcclState::fail_locked(const std::string& message, bool timeout) {
  // After an NCCL error nothing can be assumed about operations enqueued on the
  // communicator; NCCL's answer is ncclCommAbort (it stops them), and the job ends.
  abort_locked(message);
  if (timeout) throw TimeoutError(message);
  throw RuntimeError(message);
}

void NcclState::abort_locked(const std::string& reason) {
  if (aborted_.load()) return;
  abort_reason_ = reason;
  aborted_.store(true);
  if (comm_ != nullptr) {
    // Sets NCCL's abort flag, which the running kernels poll: they return, so the events
    // after them complete and no thread stays blocked in cudaEventSynchronize.
    const ncclResult_t result = ncclCommAbort(comm_);
    if (result != ncclSuccess && result != ncclInProgress)
      log_warn(where_ + ": ncclCommAbort failed: " + ncclGetErrorString(result));
    comm_ = nullptr;
  }
}

void NcclState::record(EventSlot& slot) {
  cudaEvent_t event = nullptr;
  // No timing: cheaper to record and to query.
  SDP_CUDA_CHECK(where_, cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  const cudaError_t status = cudaEventRecord(event, stream_);
  if (status != cudaSuccess) cudaEventDestroy(event);
  check_cuda_at(status, where_, SDP_CALL_SITE("cudaEventRecord(event, stream)"));
  slot.event.store(event);
}

std::shared_ptr<EventSlot> NcclState::post(const PendingP2p& op, const char* what) {
  std::lock_guard<std::mutex> lock(mutex_);
  require_usable(what);
  if (!pending_slot_) pending_slot_ = std::make_shared<EventSlot>();
  pending_.push_back(op);
  return pending_slot_;
}

void NcclState::flush() {
  CurrentDevice device(ordinal_, where_);
  std::unique_lock<std::mutex> lock(mutex_);
  // Aborted: the caller's check_health reports it. Busy: another thread's call is settling;
  // this poll finds its Work not complete yet, a later one launches the batch.
  if (aborted_.load() || busy_) return;
  flush_locked(lock);
}

void NcclState::flush_locked(std::unique_lock<std::mutex>& lock) {
  if (pending_.empty()) return;
  // Take the batch out first: settle() releases the lock, and a poll from another thread
  // must then find nothing left to launch (its Work simply is not complete yet).
  std::vector<PendingP2p> batch;
  batch.swap(pending_);
  std::shared_ptr<EventSlot> slot = std::move(pending_slot_);
  // One group: a lone ncclRecv would block the stream until its message came, and the
  // ncclSend behind it on the peer likewise; grouped, they progress together.
  ncclResult_t result = ncclGroupStart();
  if (result != ncclSuccess)
    fail_locked(nccl_failure(where_, result, SDP_CALL_SITE("ncclGroupStart"), comm_));
  ncclResult_t first_error = ncclSuccess;
  for (const PendingP2p& op : batch) {
    const ncclResult_t r = op.sending
                               ? ncclSend(op.data, op.count, op.type, op.peer, comm_, stream_)
                               : ncclRecv(op.data, op.count, op.type, op.peer, comm_, stream_);
    if (r != ncclSuccess && r != ncclInProgress && first_error == ncclSuccess) first_error = r;
  }
  result = ncclGroupEnd();  // always, to leave the group even after an error inside it
  if (first_error != ncclSuccess) result = first_error;
  settle(lock, result, SDP_CALL_SITE("ncclSend/ncclRecv group"));
  record(*slot);
}

void NcclState::check_health(const char* what) {
  std::lock_guard<std::mutex> lock(mutex_);
  require_usable(what);
  ncclResult_t async = ncclSuccess;
  const ncclResult_t query = ncclCommGetAsyncError(comm_, &async);
  if (query != ncclSuccess) async = query;
  if (async != ncclSuccess && async != ncclInProgress)
    fail_locked(nccl_failure(where_, async, SDP_CALL_SITE("ncclCommGetAsyncError"), comm_) +
                " during " + what);
}

// A Work on a CUDA event (communicator.hpp, device backends).
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclState> state, std::shared_ptr<EventSlot> slot, const char* what)
      : state_(std::move(state)), slot_(std::move(slot)), what_(what) {}

  void wait() override {
    if (done_.load()) return;
    Backoff backoff;
    cudaEvent_t event;
    while ((event = launched()) == nullptr) {  // a send/recv batch launched by another thread
      state_->check_health(what_);
      backoff.pause();
    }
    SDP_CUDA_CHECK(state_->where(), cudaEventSynchronize(event));
    state_->check_health(what_);  // aborted meanwhile: the event completed on a stopped kernel
    done_.store(true);
  }

  bool wait(std::chrono::nanoseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    Backoff backoff;
    while (!test()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      backoff.pause();
    }
    return true;
  }

  bool test() override {
    if (done_.load()) return true;
    const cudaEvent_t event = launched();
    const cudaError_t status = event == nullptr ? cudaErrorNotReady : cudaEventQuery(event);
    if (status != cudaErrorNotReady)
      check_cuda_at(status, state_->where(), SDP_CALL_SITE("cudaEventQuery(event)"));
    // Also while pending: a peer that failed shows here, not as a completion that never comes.
    state_->check_health(what_);
    if (status == cudaErrorNotReady) return false;
    done_.store(true);
    return true;
  }

  void block_stream(Stream& stream) override {
    if (stream.device().is_cpu()) {  // host work after a device operation: wait for it
      wait();
      return;
    }
    Backoff backoff;
    cudaEvent_t event;
    while ((event = launched()) == nullptr) {
      state_->check_health(what_);
      backoff.pause();
    }
    state_->check_health(what_);
    SDP_CUDA_CHECK(state_->where(),
                   cudaStreamWaitEvent(as_cuda_stream(stream).get(), event, 0));
  }

 private:
  // The event, launching this Work's send/recv batch first when it is still pending.
  cudaEvent_t launched() {
    cudaEvent_t event = slot_->event.load();
    if (event == nullptr) {
      state_->flush();
      event = slot_->event.load();
    }
    return event;
  }

  std::shared_ptr<NcclState> state_;
  std::shared_ptr<EventSlot> slot_;
  const char* what_;
  std::atomic<bool> done_{false};
};

// Shape checks of the collectives' arguments: a mismatch is a bug in the caller, reported
// before anything is enqueued.
void check_counts(const std::vector<int64_t>& counts, int64_t total, int group_size, const char* what) {
  const std::string prefix = std::string("NcclCommunicator::") + what + ": ";
  if (static_cast<int>(counts.size()) != group_size)
    throw std::logic_error(prefix + std::to_string(counts.size()) + " counts for a group of " +
                           std::to_string(group_size));
  int64_t sum = 0;
  for (int64_t c : counts) {
    if (c < 0) throw std::logic_error(prefix + "negative part " + std::to_string(c));
    sum += c;
  }
  if (sum != total)
    throw std::logic_error(prefix + "counts sum to " + std::to_string(sum) + " but the buffer holds " +
                           std::to_string(total));
}

void check_peer(int peer, int group_size, const char* what) {
  if (peer < 0 || peer >= group_size)
    throw std::logic_error(std::string("NcclCommunicator::") + what + ": rank " + std::to_string(peer) +
                           " is not in a group of " + std::to_string(group_size));
}

bool equal(const std::vector<int64_t>& counts) {
  return std::all_of(counts.begin(), counts.end(), [&](int64_t c) { return c == counts[0]; });
}

size_t count_of(const CommBuffer& buffer) { return static_cast<size_t>(buffer.count); }

// One ncclGroup of `issue(q)` for every non-empty part q. ncclGroupEnd is called even after an
// error inside the group, which would otherwise stay open on this thread.
template <typename Issue>
ncclResult_t grouped(const std::vector<int64_t>& counts, Issue&& issue) {
  ncclResult_t result = ncclGroupStart();
  if (result != ncclSuccess) return result;
  for (int q = 0; q < static_cast<int>(counts.size()); ++q) {
    if (counts[q] == 0) continue;
    const ncclResult_t r = issue(q);
    if (r != ncclSuccess && r != ncclInProgress && result == ncclSuccess) result = r;
  }
  const ncclResult_t end = ncclGroupEnd();
  return result != ncclSuccess ? result : end;
}

class NcclCommunicatorImpl final : public NcclCommunicator {
 public:
  explicit NcclCommunicatorImpl(std::shared_ptr<NcclState> state)
      : state_(std::move(state)), stream_(state_->ordinal(), state_->stream()) {}

  int rank() const override { return state_->rank(); }
  int size() const override { return state_->size(); }
  Device device() const override { return Device::cuda(state_->ordinal()); }
  std::string name() const override { return state_->label(); }
  Stream& stream() override { return stream_; }
  void abort(const std::string& reason) override { state_->abort(reason); }
  bool aborted() const override { return state_->aborted(); }
  void check_health(const char* what) override { state_->check_health(what); }

  std::shared_ptr<Work> allreduce(const CommBuffer& buffer, const AllreduceOptions& options) override;
  std::shared_ptr<Work> reduce_scatter(const CommBuffer& buffer, const std::vector<int64_t>& counts,
                                       const ReduceScatterOptions& options) override;
  std::shared_ptr<Work> allgather(const CommBuffer& buffer, const std::vector<int64_t>& counts) override;
  std::shared_ptr<Work> broadcast(const CommBuffer& buffer, const BroadcastOptions& options) override;
  std::shared_ptr<Work> barrier() override;
  // NCCL has no tags (options.tag is not used): pairs match by peer in call order.
  std::shared_ptr<Work> send(const CommBuffer& buffer, int peer, const PointToPointOptions&) override {
    return point_to_point(buffer, peer, /*sending=*/true);
  }
  std::shared_ptr<Work> recv(const CommBuffer& buffer, int peer, const PointToPointOptions&) override {
    return point_to_point(buffer, peer, /*sending=*/false);
  }

 private:
  std::shared_ptr<Work> point_to_point(const CommBuffer& buffer, int peer, bool sending);
  std::shared_ptr<Work> work(const char* what, std::shared_ptr<EventSlot> slot) {
    return std::make_shared<NcclWork>(state_, std::move(slot), what);
  }
  // Every rank skips the same empty operation (counts agree), so nothing is enqueued; an
  // aborted communicator still says so.
  std::shared_ptr<Work> nothing_to_do(const char* what) {
    state_->check_health(what);
    return completed_work();
  }
  void check_buffer(const CommBuffer& buffer, const char* what) const;

  std::shared_ptr<NcclState> state_;
  CudaStream stream_;  // a view of state_'s stream, for algorithms that chain phases
};

std::shared_ptr<Work> NcclCommunicatorImpl::allreduce(const CommBuffer& buffer, const AllreduceOptions& options) {
  check_buffer(buffer, "allreduce");
  if (buffer.count == 0) return nothing_to_do("allreduce");
  return work("allreduce", state_->enqueue(SDP_CALL_SITE("ncclAllReduce"), [&](ncclComm_t comm, cudaStream_t s) {
    return ncclAllReduce(buffer.data, buffer.data, count_of(buffer), nccl_type(buffer.dtype), nccl_op(options.op),
                         comm, s);
  }));
}

// Equal parts are NCCL's own in-place ncclReduceScatter (my part at rank * count). Uneven
// parts (a count that does not divide by size: split_counts gives the first parts one more
// element, and the hierarchical algorithm's aligned parts differ more) cannot be: NCCL
// needs equal counts. Padding to the largest part would need a scratch buffer of
// size * max part and two copies, since the parts are contiguous here, not strided. Instead
// every part is an ncclReduce to its owner, all in one ncclGroup: NCCL runs them together in
// one launch, each element still crosses each link about once (as in a ring
// reduce-scatter), the result is exact, and no memory is needed.
std::shared_ptr<Work> NcclCommunicatorImpl::reduce_scatter(const CommBuffer& buffer, const std::vector<int64_t>& counts,
                                                           const ReduceScatterOptions& options) {
  check_buffer(buffer, "reduce_scatter");
  check_counts(counts, buffer.count, size(), "reduce_scatter");
  if (buffer.count == 0) return nothing_to_do("reduce_scatter");
  const ncclDataType_t type = nccl_type(buffer.dtype);
  const ncclRedOp_t op = nccl_op(options.op);
  if (equal(counts)) {
    const int64_t part = counts[0];
    return work("reduce_scatter",
                state_->enqueue(SDP_CALL_SITE("ncclReduceScatter"), [&](ncclComm_t comm, cudaStream_t s) {
                  return ncclReduceScatter(buffer.data, buffer.slice(rank() * part, part).data,
                                           static_cast<size_t>(part), type, op, comm, s);
                }));
  }
  const std::vector<int64_t> offsets = part_offsets(counts);
  return work("reduce_scatter", state_->enqueue(SDP_CALL_SITE("ncclReduce group (uneven reduce_scatter)"),
                                                [&](ncclComm_t comm, cudaStream_t s) {
                                                  return grouped(counts, [&](int q) {
                                                    void* part = buffer.slice(offsets[q], counts[q]).data;
                                                    return ncclReduce(part, part, static_cast<size_t>(counts[q]),
                                                                      type, op, q, comm, s);
                                                  });
                                                }));
}

// Equal parts: ncclAllGather in place (my part at rank * count is the input). Uneven parts:
// every part an ncclBroadcast from its owner, in one ncclGroup (see reduce_scatter).
std::shared_ptr<Work> NcclCommunicatorImpl::allgather(const CommBuffer& buffer, const std::vector<int64_t>& counts) {
  check_buffer(buffer, "allgather");
  check_counts(counts, buffer.count, size(), "allgather");
  if (buffer.count == 0) return nothing_to_do("allgather");
  const ncclDataType_t type = nccl_type(buffer.dtype);
  if (equal(counts)) {
    const int64_t part = counts[0];
    return work("allgather", state_->enqueue(SDP_CALL_SITE("ncclAllGather"), [&](ncclComm_t comm, cudaStream_t s) {
      return ncclAllGather(buffer.slice(rank() * part, part).data, buffer.data, static_cast<size_t>(part), type, comm,
                           s);
    }));
  }
  const std::vector<int64_t> offsets = part_offsets(counts);
  return work("allgather", state_->enqueue(SDP_CALL_SITE("ncclBroadcast group (uneven allgather)"),
                                           [&](ncclComm_t comm, cudaStream_t s) {
                                             return grouped(counts, [&](int q) {
                                               void* part = buffer.slice(offsets[q], counts[q]).data;
                                               return ncclBroadcast(part, part, static_cast<size_t>(counts[q]), type,
                                                                    q, comm, s);
                                             });
                                           }));
}

std::shared_ptr<Work> NcclCommunicatorImpl::broadcast(const CommBuffer& buffer, const BroadcastOptions& options) {
  check_buffer(buffer, "broadcast");
  check_peer(options.root, size(), "broadcast");
  if (buffer.count == 0) return nothing_to_do("broadcast");
  return work("broadcast", state_->enqueue(SDP_CALL_SITE("ncclBroadcast"), [&](ncclComm_t comm, cudaStream_t s) {
    return ncclBroadcast(buffer.data, buffer.data, count_of(buffer), nccl_type(buffer.dtype), options.root, comm, s);
  }));
}

// An allreduce of one scratch element on the device: it completes on a rank only once
// every rank has enqueued it, so a completed barrier Work means every rank got there (and
// everything enqueued on this communicator before it is done). An empty ncclGroup would
// enqueue nothing and prove nothing.
std::shared_ptr<Work> NcclCommunicatorImpl::barrier() {
  return work("barrier",
              state_->enqueue(SDP_CALL_SITE("ncclAllReduce (barrier)"), [&](ncclComm_t comm, cudaStream_t s) {
                return ncclAllReduce(state_->scratch(), state_->scratch(), 1, ncclFloat32, ncclSum, comm, s);
              }));
}

std::shared_ptr<Work> NcclCommunicatorImpl::point_to_point(const CommBuffer& buffer, int peer, bool sending) {
  const char* what = sending ? "send" : "recv";
  check_buffer(buffer, what);
  check_peer(peer, size(), what);
  // Both sides agree on the count, so an empty message is skipped on both.
  if (buffer.count == 0) return nothing_to_do(what);
  return work(what, state_->post({sending, buffer.data, count_of(buffer), nccl_type(buffer.dtype), peer}, what));
}

// The buffer must be memory of this communicator's GPU: by its label, and by what CUDA
// says of the pointer (a host pointer labelled cuda would fault inside the kernel, far
// from the mistake).
void NcclCommunicatorImpl::check_buffer(const CommBuffer& buffer, const char* what) const {
  const std::string prefix = std::string("NcclCommunicator::") + what + " (" + state_->label() + "): ";
  if (!(buffer.device == device()))
    throw std::logic_error(prefix + "buffer on " + buffer.device.str() + "; this communicator reaches " +
                           device().str() + " memory only");
  if (buffer.count < 0) throw std::logic_error(prefix + "negative count " + std::to_string(buffer.count));
  if (buffer.count == 0) return;
  if (buffer.data == nullptr) throw std::logic_error(prefix + "null buffer");
  cudaPointerAttributes attributes{};
  const cudaError_t status = cudaPointerGetAttributes(&attributes, buffer.data);
  if (status != cudaSuccess) cudaGetLastError();
  const bool on_device = status == cudaSuccess &&
                         (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged);
  if (!on_device)
    throw std::logic_error(prefix + "buffer labelled " + buffer.device.str() +
                           " is not device memory (host memory or not a CUDA allocation)");
  if (attributes.type == cudaMemoryTypeDevice && attributes.device != state_->ordinal())
    throw std::logic_error(prefix + "buffer labelled " + buffer.device.str() + " lies on cuda:" +
                           std::to_string(attributes.device));
}

}  // namespace

std::shared_ptr<NcclCommunicator> make_nccl_communicator(MPI_Comm group,
                                                         const CommunicatorOptions& options) {
  int rank = 0, size = 1;
  SDP_MPI_CHECK(MPI_Comm_rank(group, &rank));
  SDP_MPI_CHECK(MPI_Comm_size(group, &size));
  const std::string who =
      "communicator backend 'nccl' ('" + options.label + "', rank " + std::to_string(rank) + ")";

  // 1. Can this rank drive its GPU? cudaSetDevice comes before any other CUDA call that
  // touches a device (the count does not). The group agrees before anyone goes on: a rank
  // that stopped here would leave the others waiting in the broadcast below.
  std::string problem;
  const int devices = cuda_device_count();
  if (devices == 0) {
    problem = who +
              " needs a GPU, but this process sees no CUDA device (no GPU, no driver, or "
              "CUDA_VISIBLE_DEVICES hides them); use distributed.backend: mpi";
  } else if (options.device.is_cpu()) {
    problem = who + " reaches device memory only, and was asked to drive cpu";
  } else if (options.device.index < 0 || options.device.index >= devices) {
    problem = who + " was asked to drive " + options.device.str() + ", but this process sees " +
              std::to_string(devices) + " CUDA device" + (devices == 1 ? "" : "s");
  } else if (const cudaError_t status = cudaSetDevice(options.device.index);
             status != cudaSuccess) {
    cudaGetLastError();
    problem = who + ": cudaSetDevice(" + std::to_string(options.device.index) +
              ") failed: " + cudaGetErrorString(status);
  }
  int failed_here = problem.empty() ? 0 : 1, failed_anywhere = 0;
  SDP_MPI_CHECK(MPI_Allreduce(&failed_here, &failed_anywhere, 1, MPI_INT, MPI_MAX, group));
  if (failed_here) throw InputError(problem);
  if (failed_anywhere)
    throw InputError(who +
                     ": another rank of the group cannot drive its GPU (its own message says why)");

  // 2. Rank 0 makes the id, MPI carries it (control plane). The result travels with it so
  // that a failure on rank 0 is an error on every rank, not a hang.
  struct {
    int status = ncclSuccess;
    ncclUniqueId id;
  } boot;
  std::memset(&boot.id, 0, sizeof boot.id);
  if (rank == 0) boot.status = ncclGetUniqueId(&boot.id);
  SDP_MPI_CHECK(MPI_Bcast(&boot, static_cast<int>(sizeof boot), MPI_BYTE, 0, group));
  if (boot.status != ncclSuccess)
    throw RuntimeError(who + ": ncclGetUniqueId failed on rank 0 of the group: " +
                       ncclGetErrorString(static_cast<ncclResult_t>(boot.status)));

  // 3. Every rank joins; the group agrees on the outcome, so a rank whose init failed does
  // not leave the others to hang in their first collective.
  auto state = std::make_shared<NcclState>(rank, size, options.device.index, options.label);
  std::exception_ptr error;
  try {
    state->init(boot.id, options.init_timeout_s);
  } catch (...) {
    error = std::current_exception();
  }
  check_all_ranks(group, error);
  return std::make_shared<NcclCommunicatorImpl>(std::move(state));
}

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "";
  // NCCL >= 2.9 encodes 2.28.9 as 22809.
  return version_and_file(
      std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." + std::to_string(v % 100),
      reinterpret_cast<const void*>(&ncclGetVersion));
}

}  // namespace sdp
