#include "distributed/local_communicator.hpp"

#include <stdexcept>
#include <string>

namespace sdp {

namespace {
void check_host(const CommBuffer& buffer) {
  if (!buffer.device.is_cpu())
    throw std::logic_error("LocalCommunicator: buffer on " + buffer.device.str() + ", expected cpu");
}
void check_counts(const CommBuffer& buffer, const std::vector<int64_t>& counts) {
  if (counts.size() != 1 || counts[0] != buffer.count)
    throw std::logic_error("LocalCommunicator: counts do not describe the buffer");
}
}  // namespace

std::shared_ptr<Work> LocalCommunicator::allreduce(const CommBuffer& buffer, const AllreduceOptions&) {
  check_host(buffer);
  return completed_work();
}

std::shared_ptr<Work> LocalCommunicator::reduce_scatter(const CommBuffer& buffer, const std::vector<int64_t>& counts,
                                                        const ReduceScatterOptions&) {
  check_host(buffer);
  check_counts(buffer, counts);
  return completed_work();
}

std::shared_ptr<Work> LocalCommunicator::allgather(const CommBuffer& buffer, const std::vector<int64_t>& counts) {
  check_host(buffer);
  check_counts(buffer, counts);
  return completed_work();
}

std::shared_ptr<Work> LocalCommunicator::broadcast(const CommBuffer& buffer, const BroadcastOptions& options) {
  check_host(buffer);
  if (options.root != 0) throw std::logic_error("LocalCommunicator: broadcast root " + std::to_string(options.root));
  return completed_work();
}

std::shared_ptr<Work> LocalCommunicator::send(const CommBuffer&, int peer, const PointToPointOptions&) {
  throw std::logic_error("LocalCommunicator: send to rank " + std::to_string(peer) + " in a group of one");
}

std::shared_ptr<Work> LocalCommunicator::recv(const CommBuffer&, int peer, const PointToPointOptions&) {
  throw std::logic_error("LocalCommunicator: recv from rank " + std::to_string(peer) + " in a group of one");
}

}  // namespace sdp
