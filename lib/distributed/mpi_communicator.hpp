// MpiCommunicator: the Communicator over an MPI communicator and host memory.
//
// Collectives complete before they return (the Work is already done): Open MPI's blocking
// collectives are its tuned ones, while its non-blocking collectives (libnbc) are slower and
// progress only inside later MPI calls. Overlap with computation comes from running the
// collectives on a communication thread (gradient_reducer.hpp), not from these handles.
// send/recv are truly non-blocking (MPI_Isend/MPI_Irecv); ring algorithms pipeline on them.
// Their Work waits as MpiWait says.
//
// Thread level: one thread at a time drives MPI (MPI_THREAD_SERIALIZED, see init_mpi; checked
// at construction). Made by make_communicator (communicator_factory.hpp), not directly.
#pragma once

#include <mpi.h>

#include <vector>

#include "distributed/communicator.hpp"

namespace sdp {

// How a send/recv Work's wait() waits (and a shared arena's barrier, shared_arena.hpp):
//   kPoll  MPI_Waitall: Open MPI spins in its progress loop for the whole wait, the quickest
//          to see a message arrive on a core with nothing else to run;
//   kNap   tests with a yield for 100 us, then naps 20 us between tests: a spinning thread
//          spends CPU that others sharing it need (a CPU quota's budget, the other ranks of a
//          simulated host), and on an idle core the naps cost LeNet-5's ring steps up to 16 %.
//          allreduce first meets every rank at a barrier waited for so, then runs
//          MPI_Allreduce, which spins only while the bytes move.
enum class MpiWait { kPoll, kNap };
// kNap where the process runs under a cgroup CPU quota (cgroup_cpu_quota), else kPoll.
MpiWait default_mpi_wait();
// Completes `requests` as `how` says.
void wait_all(std::vector<MPI_Request>& requests, MpiWait how);
// MPI_Barrier, or under kNap MPI_Ibarrier completed by wait_all.
void mpi_barrier(MPI_Comm comm, MpiWait how);

class MpiCommunicator final : public Communicator {
 public:
  // Does not take ownership of `comm` (World owns its communicators and outlives this).
  explicit MpiCommunicator(MPI_Comm comm, std::string name = "mpi", MpiWait wait = default_mpi_wait());

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return Device::cpu(); }
  std::string name() const override { return name_; }
  MPI_Comm comm() const { return comm_; }
  MpiWait waits() const { return wait_; }

  std::shared_ptr<Work> allreduce(const CommBuffer& buffer, const AllreduceOptions& options = {}) override;
  std::shared_ptr<Work> reduce_scatter(const CommBuffer& buffer, const std::vector<int64_t>& counts,
                                       const ReduceScatterOptions& options = {}) override;
  std::shared_ptr<Work> allgather(const CommBuffer& buffer, const std::vector<int64_t>& counts) override;
  std::shared_ptr<Work> broadcast(const CommBuffer& buffer, const BroadcastOptions& options = {}) override;
  std::shared_ptr<Work> barrier() override;
  std::shared_ptr<Work> send(const CommBuffer& buffer, int peer, const PointToPointOptions& options = {}) override;
  std::shared_ptr<Work> recv(const CommBuffer& buffer, int peer, const PointToPointOptions& options = {}) override;

 private:
  // send and recv differ only in the MPI call: one path for both.
  std::shared_ptr<Work> point_to_point(const CommBuffer& buffer, int peer, const PointToPointOptions& options,
                                       bool sending);
  MPI_Comm comm_;
  std::string name_;
  MpiWait wait_;
  int rank_ = 0, size_ = 1;
};

}  // namespace sdp
