// SocketRing: the inter-node phase of the hierarchical AllReduce over plain TCP sockets
// (Gloo's and NCCL's socket transport, in miniature): a ring over the ranks of `inter` (one
// rank per node with my local_rank), each rank connected to its right neighbour and from
// its left one, running reduce-scatter then allgather.
//
// Why not MPI (measured on scripts/simcluster.sh, 2 hosts x 2 ranks, 1 Gbit/s links, a
// loaded 2-core machine; docs/records/benchmarks-history.md "Simulated cluster"): Open MPI's
// TCP transport moves bytes only while the process is inside an MPI call polling its sockets,
// a few 128 KiB fragments at a time (ob1 pipeline depth 3-4). With more ranks than cores a rank
// waits for a core for milliseconds at a time, and the link idles meanwhile: the same
// exchange of 32 MiB per pair took 0.6-1.3 s through MPI (55-90 % of the link, varying from
// run to run) and 0.52-0.59 s (91-100 %) over blocking sockets. A blocking socket is
// woken by the kernel when its data arrives and the kernel's socket buffers (autotuned, up
// to megabytes) keep the link busy while the rank waits for a core.
//
// Per call: a sender thread writes the outgoing part while this thread reads the incoming
// one in segments and adds each as it arrives (the add overlaps the transfer). Bytes each
// rank sends: 2 (H-1)/H of its buffer, the ring's optimum; the sum of each element is
// accumulated in ring order once and then copied, so every rank ends with bitwise the
// same result.
//
// Address: the first IPv4 address of the interface named by SDP_SOCKET_IFNAME (a prefix,
// as NCCL_SOCKET_IFNAME), else of the first interface that is up and not loopback nor a
// container bridge (docker*, br-*, veth*, virbr*), else 127.0.0.1. create() is collective over
// `world`; it returns null on every rank when any rank could not connect (the caller keeps
// MPI) or SDP_INTER_TRANSPORT=mpi on any rank.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.hpp"

namespace sdp {

class SocketRing {
 public:
  static std::unique_ptr<SocketRing> create(MPI_Comm inter, MPI_Comm world);
  ~SocketRing();
  SocketRing(const SocketRing&) = delete;
  SocketRing& operator=(const SocketRing&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // In-place SUM over the ring of `buffer` (host memory; f32, f16 or bf16). Collective over
  // `inter`, same count and dtype everywhere. Throws RuntimeError when a peer goes away.
  void allreduce(const CommBuffer& buffer);
  // Bytes this rank has written to its right neighbour so far (for tests).
  int64_t bytes_sent() const { return bytes_sent_; }
  // The address this rank listens on, "ip:port" (for the plan printout and errors).
  const std::string& address() const { return address_; }

 private:
  SocketRing() = default;
  int rank_ = 0, size_ = 1;
  int right_fd_ = -1, left_fd_ = -1;
  int64_t bytes_sent_ = 0;
  std::string address_;
  std::vector<char> scratch_;
};

// The inter-node communicator of a hierarchical AllReduce over sockets: allreduce runs on the
// ring (kAvg: the sum, then scaled once), every other collective on `group`, the MPI
// communicator of the same ranks. Under a StagedCommunicator it is the host inter-node phase
// of GPU buffers (inter_node.hpp).
class SocketRingCommunicator final : public Communicator {
 public:
  SocketRingCommunicator(std::unique_ptr<SocketRing> ring, std::shared_ptr<Communicator> group);
  int rank() const override { return ring_->rank(); }
  int size() const override { return ring_->size(); }
  Device device() const override { return Device::cpu(); }
  std::string name() const override { return "sockets"; }
  const SocketRing& ring() const { return *ring_; }

  std::shared_ptr<Work> allreduce(const CommBuffer& buffer, const AllreduceOptions& options = {}) override;
  std::shared_ptr<Work> reduce_scatter(const CommBuffer& buffer, const std::vector<int64_t>& counts,
                                       const ReduceScatterOptions& options = {}) override {
    return group_->reduce_scatter(buffer, counts, options);
  }
  std::shared_ptr<Work> allgather(const CommBuffer& buffer, const std::vector<int64_t>& counts) override {
    return group_->allgather(buffer, counts);
  }
  std::shared_ptr<Work> broadcast(const CommBuffer& buffer, const BroadcastOptions& options = {}) override {
    return group_->broadcast(buffer, options);
  }
  std::shared_ptr<Work> barrier() override { return group_->barrier(); }
  std::shared_ptr<Work> send(const CommBuffer& buffer, int peer, const PointToPointOptions& options = {}) override {
    return group_->send(buffer, peer, options);
  }
  std::shared_ptr<Work> recv(const CommBuffer& buffer, int peer, const PointToPointOptions& options = {}) override {
    return group_->recv(buffer, peer, options);
  }

 private:
  std::unique_ptr<SocketRing> ring_;
  std::shared_ptr<Communicator> group_;
};

// "mpi" when SDP_INTER_TRANSPORT=mpi, else "sockets".
std::string inter_transport_from_env();

}  // namespace sdp
