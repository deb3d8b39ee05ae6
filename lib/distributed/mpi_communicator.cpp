#include "distributed/mpi_communicator.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "core/device_info.hpp"
#include "distributed/mpi_check.hpp"
#include "distributed/reduce_kernels.hpp"

namespace sdp {

namespace {

// MPI counts are int: larger buffers go in chunks of this many elements.
constexpr int64_t kMaxChunk = INT_MAX / 2;

void check_host(const CommBuffer& buffer, const char* what) {
  if (!buffer.device.is_cpu())
    throw std::logic_error(std::string("MpiCommunicator::") + what + ": buffer on " + buffer.device.str() +
                           "; this backend reaches host memory only");
}

std::vector<int> int_counts(const std::vector<int64_t>& counts, int size, int64_t total, const char* what) {
  if (static_cast<int>(counts.size()) != size)
    throw std::logic_error(std::string("MpiCommunicator::") + what + ": " + std::to_string(counts.size()) +
                           " counts for a group of " + std::to_string(size));
  int64_t sum = 0;
  std::vector<int> out(size);
  for (int r = 0; r < size; ++r) {
    if (counts[r] < 0 || counts[r] > INT_MAX)
      throw std::logic_error(std::string("MpiCommunicator::") + what + ": part of " + std::to_string(counts[r]) +
                             " elements does not fit an MPI count");
    out[r] = static_cast<int>(counts[r]);
    sum += counts[r];
  }
  if (sum != total)
    throw std::logic_error(std::string("MpiCommunicator::") + what + ": counts sum to " + std::to_string(sum) +
                           " but the buffer holds " + std::to_string(total));
  return out;
}

// Outstanding MPI requests; wait() completes all of them.
class MpiRequestWork final : public Work {
 public:
  MpiRequestWork(std::vector<MPI_Request> requests, MpiWait how) : requests_(std::move(requests)), how_(how) {}
  ~MpiRequestWork() override {
    // A dropped handle must not leave MPI writing into freed memory: complete it here.
    if (!requests_.empty()) MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  }
  void wait() override {
    if (requests_.empty()) return;
    wait_all(requests_, how_);
    requests_.clear();
  }
  bool wait(std::chrono::nanoseconds timeout) override {
    // MPI has no timed wait: poll, yielding the core between tests.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!test()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }
  bool test() override {
    if (requests_.empty()) return true;
    int done = 0;
    SDP_MPI_CHECK(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE));
    if (done) requests_.clear();
    return done != 0;
  }

 private:
  std::vector<MPI_Request> requests_;
  MpiWait how_;
};

}  // namespace

// Napping: the socket buffers keep the link busy during a nap; MPI moves more at the next test.
void wait_all(std::vector<MPI_Request>& requests, MpiWait how) {
  if (how == MpiWait::kPoll) {
    SDP_MPI_CHECK(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
    return;
  }
  using Clock = std::chrono::steady_clock;
  constexpr auto kSpin = std::chrono::microseconds(100);
  constexpr auto kNap = std::chrono::microseconds(20);
  const auto spin_until = Clock::now() + kSpin;
  for (;;) {
    int done = 0;
    SDP_MPI_CHECK(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE));
    if (done) return;
    if (Clock::now() < spin_until)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(kNap);
  }
}

void mpi_barrier(MPI_Comm comm, MpiWait how) {
  if (how == MpiWait::kPoll) {
    SDP_MPI_CHECK(MPI_Barrier(comm));
    return;
  }
  std::vector<MPI_Request> request(1);
  SDP_MPI_CHECK(MPI_Ibarrier(comm, request.data()));
  wait_all(request, how);
}

MpiWait default_mpi_wait() {
  static const MpiWait how = cgroup_cpu_quota() > 0 ? MpiWait::kNap : MpiWait::kPoll;
  return how;
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name, MpiWait wait)
    : comm_(comm), name_(std::move(name)), wait_(wait) {
  SDP_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  SDP_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  // Collectives run on a communication thread while the training thread computes
  // (gradient_reducer.hpp): one thread at a time, which MPI allows from SERIALIZED up.
  int provided = 0;
  SDP_MPI_CHECK(MPI_Query_thread(&provided));
  if (provided < MPI_THREAD_SERIALIZED)
    throw RuntimeError("MpiCommunicator needs MPI_THREAD_SERIALIZED (collectives run on a communication "
                       "thread), but MPI provides level " + std::to_string(provided) + "; start MPI with init_mpi");
}

std::shared_ptr<Work> MpiCommunicator::allreduce(const CommBuffer& buffer, const AllreduceOptions& options) {
  check_host(buffer, "allreduce");
  if (size_ > 1) {
    // Under a quota, a rank that arrives early naps at a barrier until every rank is there:
    // MPI_Allreduce would spin the wait away on the host's share, and its non-blocking form
    // (libnbc) moves only at each test. The AllReduce then spins only while the bytes move.
    if (wait_ == MpiWait::kNap) mpi_barrier(comm_, wait_);
    for (int64_t begin = 0; begin < buffer.count; begin += kMaxChunk) {
      const int n = static_cast<int>(std::min(kMaxChunk, buffer.count - begin));
      SDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buffer.slice(begin, n).data, n, mpi_datatype(buffer.dtype),
                                  mpi_sum_op(buffer.dtype), comm_));
    }
  }
  if (options.op == ReduceOp::kAvg) scale_in_place(buffer.dtype, buffer.data, buffer.count, 1.0f / size_);
  return completed_work();
}

std::shared_ptr<Work> MpiCommunicator::reduce_scatter(const CommBuffer& buffer, const std::vector<int64_t>& counts,
                                                      const ReduceScatterOptions& options) {
  check_host(buffer, "reduce_scatter");
  const std::vector<int> n = int_counts(counts, size_, buffer.count, "reduce_scatter");
  const int64_t offset = part_offsets(counts)[rank_];
  if (size_ > 1 && buffer.count > 0) {
    // MPI_IN_PLACE leaves my part at the START of the buffer; move it to its own offset
    // (memmove: the ranges overlap when my part is long).
    SDP_MPI_CHECK(MPI_Reduce_scatter(MPI_IN_PLACE, buffer.data, n.data(), mpi_datatype(buffer.dtype),
                                     mpi_sum_op(buffer.dtype), comm_));
    if (offset > 0) std::memmove(buffer.slice(offset, 0).data, buffer.data, counts[rank_] * buffer.element_size());
  }
  if (options.op == ReduceOp::kAvg)
    scale_in_place(buffer.dtype, buffer.slice(offset, 0).data, counts[rank_], 1.0f / size_);
  return completed_work();
}

std::shared_ptr<Work> MpiCommunicator::allgather(const CommBuffer& buffer, const std::vector<int64_t>& counts) {
  check_host(buffer, "allgather");
  const std::vector<int> n = int_counts(counts, size_, buffer.count, "allgather");
  if (size_ == 1 || buffer.count == 0) return completed_work();
  std::vector<int> displs(size_);
  const std::vector<int64_t> offsets = part_offsets(counts);
  for (int r = 0; r < size_; ++r) {
    if (offsets[r] > INT_MAX) throw std::logic_error("MpiCommunicator::allgather: buffer too long for MPI displacements");
    displs[r] = static_cast<int>(offsets[r]);
  }
  SDP_MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer.data, n.data(), displs.data(),
                               mpi_datatype(buffer.dtype), comm_));
  return completed_work();
}

std::shared_ptr<Work> MpiCommunicator::broadcast(const CommBuffer& buffer, const BroadcastOptions& options) {
  check_host(buffer, "broadcast");
  if (size_ == 1) return completed_work();
  for (int64_t begin = 0; begin < buffer.count; begin += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, buffer.count - begin));
    SDP_MPI_CHECK(MPI_Bcast(buffer.slice(begin, n).data, n, mpi_datatype(buffer.dtype), options.root, comm_));
  }
  return completed_work();
}

std::shared_ptr<Work> MpiCommunicator::barrier() {
  SDP_MPI_CHECK(MPI_Barrier(comm_));
  return completed_work();
}

std::shared_ptr<Work> MpiCommunicator::send(const CommBuffer& buffer, int peer, const PointToPointOptions& options) {
  return point_to_point(buffer, peer, options, /*sending=*/true);
}

std::shared_ptr<Work> MpiCommunicator::recv(const CommBuffer& buffer, int peer, const PointToPointOptions& options) {
  return point_to_point(buffer, peer, options, /*sending=*/false);
}

std::shared_ptr<Work> MpiCommunicator::point_to_point(const CommBuffer& buffer, int peer,
                                                      const PointToPointOptions& options, bool sending) {
  check_host(buffer, sending ? "send" : "recv");
  // One message per chunk (at least one, so an empty message still pairs with its peer's);
  // both sides chunk the same count the same way, so the pieces match in order.
  std::vector<MPI_Request> requests;
  for (int64_t begin = 0; begin < buffer.count || begin == 0; begin += kMaxChunk) {
    const int n = static_cast<int>(std::min(kMaxChunk, buffer.count - begin));
    void* data = buffer.slice(begin, n).data;
    requests.emplace_back();
    if (sending)
      SDP_MPI_CHECK(MPI_Isend(data, n, mpi_datatype(buffer.dtype), peer, options.tag, comm_, &requests.back()));
    else
      SDP_MPI_CHECK(MPI_Irecv(data, n, mpi_datatype(buffer.dtype), peer, options.tag, comm_, &requests.back()));
    if (buffer.count == 0) break;
  }
  return std::make_shared<MpiRequestWork>(std::move(requests), wait_);
}

}  // namespace sdp
