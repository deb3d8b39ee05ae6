// StagedCommunicator: the collectives of a host communicator (MPI) on buffers in GPU memory,
// staged through page-locked host memory, as Horovod does with HOROVOD_GPU_OPERATIONS=MPI
// and an MPI that is not CUDA-aware. `distributed.backend: mpi` on a GPU makes one
// (communicator_factory.cpp).
//
// A collective runs in rounds of at most `chunk_bytes`. Each round copies its pieces of the
// device buffer into one of two host slots on the communicator's copy stream, runs the host
// collective on the slot, and queues the copies back. The copies of round k+1 are queued
// before the host works on round k, so on a GPU they run while round k crosses the wire and
// is summed; one stream orders every copy, so a slot is refilled only after the copies back
// out of it (round k-1's) are done. The host waits for a round's copies in (an event) and
// nothing else; the returned Work completes with the last copy back.
//
// Rounds of the four collectives (n ranks, per-rank parts for reduce_scatter / allgather):
//   allreduce, broadcast: a contiguous slice of the buffer in, the same slice back;
//   reduce_scatter: the j-th slice of every rank's part in (packed, so the host collective
//     sees parts of `counts_j`), my slice back;
//   allgather: my j-th slice in, every rank's j-th slice back to its place.
// send / recv go whole, through a host copy of their own (a ring posts its receive before
// its send: a receive in rounds would wait for a message not yet sent).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "distributed/communicator.hpp"

namespace sdp {

class StagedCommunicator final : public Communicator {
 public:
  static constexpr int64_t kDefaultChunkBytes = 4 << 20;

  // `host`: the communicator that moves host memory; `copy_stream`: a stream of the device
  // whose buffers this communicator takes (its copies, and stream() for the callers).
  StagedCommunicator(std::shared_ptr<Communicator> host, std::shared_ptr<Stream> copy_stream,
                     int64_t chunk_bytes = kDefaultChunkBytes);

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  Device device() const override { return stream_->device(); }
  std::string name() const override { return host_->name(); }
  Stream& stream() override { return *stream_; }

  std::shared_ptr<Work> allreduce(const CommBuffer& buffer,
                                  const AllreduceOptions& options = {}) override;
  std::shared_ptr<Work> reduce_scatter(const CommBuffer& buffer, const std::vector<int64_t>& counts,
                                       const ReduceScatterOptions& options = {}) override;
  std::shared_ptr<Work> allgather(const CommBuffer& buffer,
                                  const std::vector<int64_t>& counts) override;
  std::shared_ptr<Work> broadcast(const CommBuffer& buffer,
                                  const BroadcastOptions& options = {}) override;
  std::shared_ptr<Work> barrier() override { return host_->barrier(); }
  std::shared_ptr<Work> send(const CommBuffer& buffer, int peer,
                             const PointToPointOptions& options = {}) override;
  std::shared_ptr<Work> recv(const CommBuffer& buffer, int peer,
                             const PointToPointOptions& options = {}) override;

  // One contiguous run of a round: `count` elements at `device_offset` of the buffer and at
  // `staged_offset` of the slot.
  struct Piece {
    int64_t device_offset = 0, count = 0, staged_offset = 0;
  };
  struct Round {
    std::vector<Piece> in, out;   // copied to the slot before, back from it after
    int64_t staged_count = 0;     // elements of the slot the host collective works on
    std::vector<int64_t> counts;  // reduce_scatter / allgather: the parts of this round
  };
  // The rounds of a reduce_scatter / allgather of `counts` with at most `per_rank` elements of
  // each part per round (exposed for tests).
  static std::vector<Round> part_rounds(const std::vector<int64_t>& counts, int64_t per_rank,
                                        int me, bool gather);

 private:
  // Runs `rounds` over `buffer`, calling host_op(slot, round) between the copies in and out.
  std::shared_ptr<Work> run(const CommBuffer& buffer, const std::vector<Round>& rounds,
                            const std::function<void(const CommBuffer&, const Round&)>& host_op);
  std::vector<Round> slice_rounds(int64_t count, int64_t element_size) const;
  std::vector<Round> my_part_rounds(const CommBuffer& buffer, const std::vector<int64_t>& counts, bool gather) const;
  void check_buffer(const CommBuffer& buffer, const char* op) const;

  std::shared_ptr<Communicator> host_;
  std::shared_ptr<Stream> stream_;
  int64_t chunk_bytes_;
  std::shared_ptr<void> slots_[2];
  int64_t slot_bytes_ = 0;
  std::unique_ptr<Event> copied_in_[2];
};

}  // namespace sdp
