// Communicator: the one narrow interface every collective backend implements (docs/architecture.md,
// "Communicators"; modelled on PyTorch c10d's Backend). Algorithms (flat, ring, hierarchical: allreduce.hpp)
// are built from communicators, never inside them.
//
// Contract (as in c10d): every rank of the group calls the collectives in the same order,
// with the same counts, dtype and options. A mismatch is undefined (hang or garbage); the
// watchdog (watchdog.hpp) turns a hang into a clear abort. Calls from several threads need
// external serialization (one thread drives a communicator at a time).
//
// Buffers carry their element type and device so a device backend (NCCL: device pointers,
// a CUDA stream) fits the same interface; a backend rejects a device it cannot address.
// All collectives work IN PLACE on one buffer, NCCL style:
//   reduce_scatter(buffer, counts): buffer = counts[0] elements for rank 0, then counts[1]
//     for rank 1, ...; afterwards MY part holds the reduction, the other parts are undefined.
//   allgather(buffer, counts): MY part is the input; afterwards every part holds its owner's.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/stream.hpp"
#include "core/tensor.hpp"

namespace sdp {

enum class ReduceOp { kSum, kAvg };  // kAvg: the sum scaled by 1/size, once

const char* reduce_op_name(ReduceOp op);

// A contiguous run of `count` elements of `dtype` at `data` on `device`. Not owning.
struct CommBuffer {
  void* data = nullptr;
  int64_t count = 0;
  DType dtype = DType::kF32;
  Device device = Device::cpu();

  static CommBuffer host(float* data, int64_t count) { return {data, count, DType::kF32, Device::cpu()}; }
  // The whole of `tensor`, with its dtype and device (model state: parameters, buffers).
  static CommBuffer of(const Tensor& tensor) { return {tensor.raw(), tensor.numel(), tensor.dtype(), tensor.device()}; }
  int64_t element_size() const { return static_cast<int64_t>(dtype_size(dtype)); }
  int64_t nbytes() const { return count * element_size(); }
  char* bytes() const { return static_cast<char*>(data); }
  CommBuffer slice(int64_t offset, int64_t n) const {
    return {bytes() + offset * element_size(), n, dtype, device};
  }
};

// Handle to an asynchronous operation (c10d's Work). A Work must be complete (wait() returned,
// or wait(timeout) / test() returned true) before its buffer is reused or freed; dropping an
// incomplete Work is a programming error that the backend may detect.
//
// Completion, per kind of backend:
//   host backends (MPI, local, a host thread running a collective): complete means the
//     operation has finished and its results are in host memory, visible to the thread that
//     observed completion. There are no streams: block_stream() is a no-op.
//   device backends (NCCL): the operation was enqueued on the communicator's stream and the
//     Work holds an event recorded after it. Complete means the DEVICE work has finished:
//     test() is cudaEventQuery(event) == cudaSuccess, wait(timeout) polls that query until
//     the timeout, wait() is cudaEventSynchronize. block_stream(s) is cudaStreamWaitEvent(s,
//     event): work later enqueued on `s` (e.g. the optimizer on the compute stream) sees the
//     result, and the host does not block (llm.c zero.cuh; c10d's ProcessGroupNCCL::WorkNCCL).
//     A host stream given to block_stream is ordered by waiting.
// A failed operation throws its error (sdp::Error) from wait() and from the wait(timeout) /
// test() call that observes the failure.
// Threads: test() and wait(timeout) must be cheap and never block past the timeout; only the
// thread that drives the communicator may call them for MPI request-backed Works (MPI is
// SERIALIZED), while Works completed by another thread (HostWork) or by a device event may be
// polled from any thread.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until complete.
  virtual void wait() = 0;
  // Blocks at most `timeout`; true when complete (then as wait()).
  virtual bool wait(std::chrono::nanoseconds timeout) = 0;
  // Never blocks; true when complete.
  virtual bool test() = 0;
  // Orders work later enqueued on `stream` after this operation, without blocking the host.
  // Host backends: nothing to order (the result is in host memory once complete).
  virtual void block_stream(Stream& /*stream*/) {}
};

// A Work that completed when it was created (blocking backends, empty operations).
class CompletedWork final : public Work {
 public:
  void wait() override {}
  bool wait(std::chrono::nanoseconds) override { return true; }
  bool test() override { return true; }
};
std::shared_ptr<Work> completed_work();
// A Work that completes with the work queued on `stream` so far (an Event recorded there);
// on a host stream, completed_work().
std::shared_ptr<Work> work_after(Stream& stream);

struct AllreduceOptions {
  ReduceOp op = ReduceOp::kSum;
};
struct ReduceScatterOptions {
  ReduceOp op = ReduceOp::kSum;
};
struct BroadcastOptions {
  int root = 0;
};
struct PointToPointOptions {
  int tag = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Where buffers must live (cpu for MPI over host memory, cuda:i for NCCL).
  virtual Device device() const = 0;
  virtual std::string name() const = 0;
  // The stream the collectives are enqueued on (device backends; an algorithm chains phases
  // over several communicators with Work::block_stream and Stream::wait_for). Host backends
  // run on the calling thread: host_stream().
  virtual Stream& stream() { return host_stream(); }

  virtual std::shared_ptr<Work> allreduce(const CommBuffer& buffer, const AllreduceOptions& options = {}) = 0;
  // counts.size() == size(); sum(counts) == buffer.count. See the in-place rules above.
  virtual std::shared_ptr<Work> reduce_scatter(const CommBuffer& buffer, const std::vector<int64_t>& counts,
                                               const ReduceScatterOptions& options = {}) = 0;
  virtual std::shared_ptr<Work> allgather(const CommBuffer& buffer, const std::vector<int64_t>& counts) = 0;
  virtual std::shared_ptr<Work> broadcast(const CommBuffer& buffer, const BroadcastOptions& options = {}) = 0;
  virtual std::shared_ptr<Work> barrier() = 0;
  // Point-to-point, for algorithms built from messages (ring). Pairs match by (peer, tag)
  // in call order, as in MPI.
  virtual std::shared_ptr<Work> send(const CommBuffer& buffer, int peer, const PointToPointOptions& options = {}) = 0;
  virtual std::shared_ptr<Work> recv(const CommBuffer& buffer, int peer, const PointToPointOptions& options = {}) = 0;
};

// Offset of each part for `counts` (exclusive prefix sum).
std::vector<int64_t> part_offsets(const std::vector<int64_t>& counts);

// Splits `count` elements into `parts` consecutive parts. align == 1: as even as possible
// (the first count % parts parts one longer). align > 1: every part but the last non-empty
// one is ceil(count / parts) rounded up to a multiple of `align` (a cache line, so ranks
// writing neighbouring parts never share a line); trailing parts may be short or empty.
std::vector<int64_t> split_counts(int64_t count, int parts, int64_t align = 1);

}  // namespace sdp
