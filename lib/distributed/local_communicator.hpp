// LocalCommunicator: a group of one process, no MPI. Every collective is the identity
// (a sum over one rank is the input; an average divides by 1). For unit tests of code
// built on Communicator, and for single-process runs that never start MPI.
#pragma once

#include "distributed/communicator.hpp"

namespace sdp {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Device device() const override { return Device::cpu(); }
  std::string name() const override { return "local"; }

  std::shared_ptr<Work> allreduce(const CommBuffer& buffer, const AllreduceOptions& options = {}) override;
  std::shared_ptr<Work> reduce_scatter(const CommBuffer& buffer, const std::vector<int64_t>& counts,
                                       const ReduceScatterOptions& options = {}) override;
  std::shared_ptr<Work> allgather(const CommBuffer& buffer, const std::vector<int64_t>& counts) override;
  std::shared_ptr<Work> broadcast(const CommBuffer& buffer, const BroadcastOptions& options = {}) override;
  std::shared_ptr<Work> barrier() override { return completed_work(); }
  // A group of one has no peer: both throw std::logic_error.
  std::shared_ptr<Work> send(const CommBuffer& buffer, int peer, const PointToPointOptions& options = {}) override;
  std::shared_ptr<Work> recv(const CommBuffer& buffer, int peer, const PointToPointOptions& options = {}) override;
};

}  // namespace sdp
