// AllReduce algorithms over communicators, selected by distributed.allreduce:
//   flat          one allreduce over the world communicator (MPI's own algorithm);
//   ring          our ring: reduce-scatter then allgather, n-1 steps each, over
//                 point-to-point messages, pipelined in segments (for study and as a check);
//   hierarchical  Horovod's NCCLHierarchicalAllreduce on CPU: reduce-scatter inside the node,
//                 allreduce of my part across nodes (ranks with my local_rank), allgather
//                 inside the node. When the buffer lies in a SharedArena the intra phases run
//                 in shared memory (shm_collectives.hpp), else over the intra communicator.
//                 Built by make_allreduce, the inter-node phase of host buffers runs over
//                 TCP sockets (socket_ring.hpp: the link stays busy while ranks wait for a
//                 core) unless SDP_INTER_TRANSPORT=mpi; GPU buffers cross over NCCL, or with
//                 inter_node host staged through pinned memory to the same sockets
//                 (inter_node.hpp);
//   auto          across nodes, flat for buffers under kAutoFlatBelowBytes (latency-bound:
//                 one MPI call beats two node phases and socket round trips; measured on
//                 scripts/simcluster.sh, see scripts/bench-simcluster.sh); otherwise
//                 hierarchical when the node phase can use shared memory (buffer in the
//                 arena) or nodes > 1 with local_size > 1; flat otherwise (measured: see
//                 scripts/bench-allreduce.sh).
// Compression (fp16 / bf16) converts to the 16-bit wire type scaled by 1/size BEFORE the sum
// (so a sum over any number of ranks cannot overflow fp16 unless the mean does), reduces, and
// converts back, multiplying by size again for a SUM. hierarchical compresses only the
// inter-node phase: the node phase stays f32 in shared memory, where compression would cost
// more than it saves.
//
// Contract: run() is collective over the world; every rank calls it in the same order with the
// same count, dtype and op. All algorithms give every rank bitwise the same result, and the
// exact sum for integer-valued f32 input that fits the mantissa.
// Ordering (c10d's Work): run(buffer, op, stream) starts after the work queued so far on
// `stream` (the one that produced the buffer; host_stream() when it is ready on the host) and
// returns a Work. Host buffers are reduced when run returns (MPI's blocking collectives are
// its fastest), and the Work is complete. GPU buffers: the phases are enqueued on the
// communicators' streams and chained by events, the host waits for none of them, and the Work
// completes with the last; Work::block_stream orders later device work after it. So the
// buckets of a step pipeline on NCCL.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/choices.hpp"
#include "distributed/communicator.hpp"
#include "distributed/comm_backend.hpp"

namespace sdp {

class SharedArena;
class World;

class AllreduceAlgorithm {
 public:
  virtual ~AllreduceAlgorithm() = default;
  virtual std::string name() const = 0;
  std::shared_ptr<Work> run(const CommBuffer& buffer, ReduceOp op, Stream& stream = host_stream()) {
    return start(buffer, op, stream);
  }

 private:
  virtual std::shared_ptr<Work> start(const CommBuffer& buffer, ReduceOp op, Stream& stream) = 0;
};

class FlatAllreduce final : public AllreduceAlgorithm {
 public:
  explicit FlatAllreduce(std::shared_ptr<Communicator> world) : world_(std::move(world)) {}
  std::string name() const override { return "flat"; }

 private:
  std::shared_ptr<Work> start(const CommBuffer& buffer, ReduceOp op, Stream& stream) override;
  std::shared_ptr<Communicator> world_;
};

class RingAllreduce final : public AllreduceAlgorithm {
 public:
  // Each ring step is sent in segments of `segment_bytes`, so the reduction of a segment
  // overlaps the transfer of the next.
  explicit RingAllreduce(std::shared_ptr<Communicator> world, int64_t segment_bytes = 256 << 10)
      : world_(std::move(world)), segment_bytes_(segment_bytes) {}
  std::string name() const override { return "ring"; }

 private:
  std::shared_ptr<Work> start(const CommBuffer& buffer, ReduceOp op, Stream& stream) override;
  std::shared_ptr<Communicator> world_;
  int64_t segment_bytes_;
  std::vector<char> scratch_;
};

class HierarchicalAllreduce final : public AllreduceAlgorithm {
 public:
  // `arena` (optional): buffers inside it use the shared-memory node phase. `wire`: the
  // element type of the inter-node phase (kF32, or kF16 / kBF16 to compress it).
  HierarchicalAllreduce(std::shared_ptr<Communicator> intra, std::shared_ptr<Communicator> inter,
                        std::shared_ptr<SharedArena> arena = nullptr, DType wire = DType::kF32);
  ~HierarchicalAllreduce() override;
  std::string name() const override { return "hierarchical"; }
  // True when run(buffer) would take the shared-memory node phase.
  bool uses_shared_memory(const CommBuffer& buffer) const;
  // How the inter-node phase travels: the inter communicator's name ("sockets", or its label,
  // "inter", over MPI or NCCL).
  std::string inter_transport() const { return inter_->name(); }

 private:
  std::shared_ptr<Work> start(const CommBuffer& buffer, ReduceOp op, Stream& stream) override;
  // GPU buffers: the three phases chained on the communicators' streams.
  std::shared_ptr<Work> start_on_device(const CommBuffer& buffer, ReduceOp op, Stream& stream);
  void reduce_across_nodes(const CommBuffer& part, ReduceOp op);
  std::shared_ptr<Communicator> intra_, inter_;
  std::shared_ptr<SharedArena> arena_;
  DType wire_;
  std::vector<uint16_t> scratch_;
};

// Runs `inner` on a 16-bit copy (pre-scaled by 1/size, so the sum cannot overflow where the
// f32 mean would not) and converts back. GPU buffers: the casts run on the device, on a stream
// of this algorithm's that the inner phases are chained to, and the whole algorithm (over
// NCCL, in the 16-bit type) moves half the bytes.
class CompressedAllreduce final : public AllreduceAlgorithm {
 public:
  CompressedAllreduce(std::unique_ptr<AllreduceAlgorithm> inner, DType wire, int world_size)
      : inner_(std::move(inner)), wire_(wire), world_size_(world_size) {}
  std::string name() const override { return inner_->name(); }

 private:
  std::shared_ptr<Work> start(const CommBuffer& buffer, ReduceOp op, Stream& stream) override;
  std::unique_ptr<AllreduceAlgorithm> inner_;
  DType wire_;
  int world_size_;
  std::vector<uint16_t> scratch_;          // host buffers' 16-bit copy
  std::shared_ptr<void> device_scratch_;   // GPU buffers' (allocated on the first, grown)
  std::size_t device_scratch_bytes_ = 0;
  std::shared_ptr<Stream> casts_;          // GPU buffers: where the casts run (made on the first)
};

// 2 simulated hosts x 2 ranks, 1 Gbit/s links: flat 34 us vs hierarchical 190 us at 4 KiB,
// 225 vs 800-1200 us at 32 KiB; from 256 KiB on hierarchical wins or ties (2-3 ms), at
// 1 MiB 8.8 vs 19 ms.
constexpr int64_t kAutoFlatBelowBytes = 256 << 10;

class AutoAllreduce final : public AllreduceAlgorithm {
 public:
  AutoAllreduce(std::unique_ptr<AllreduceAlgorithm> flat, std::unique_ptr<HierarchicalAllreduce> hierarchical,
                bool multi_node_multi_local, bool multi_node = false)
      : flat_(std::move(flat)), hierarchical_(std::move(hierarchical)), multi_(multi_node_multi_local),
        multi_node_(multi_node) {}
  std::string name() const override { return "auto"; }
  // The algorithm auto runs for `buffer` ("flat" or "hierarchical"), for the plan printout.
  std::string choice(const CommBuffer& buffer) const { return choose(buffer).name(); }

 private:
  std::shared_ptr<Work> start(const CommBuffer& buffer, ReduceOp op, Stream& stream) override {
    return choose(buffer).run(buffer, op, stream);
  }
  AllreduceAlgorithm& choose(const CommBuffer& buffer) const;
  std::unique_ptr<AllreduceAlgorithm> flat_;
  std::unique_ptr<HierarchicalAllreduce> hierarchical_;
  bool multi_;
  bool multi_node_;
};

struct AllreduceSetup {
  AllreduceKind algorithm = AllreduceKind::kAuto;
  Compression compression = Compression::kNone;
  // Node-shared memory holding the buffers (the gradient arena), or null.
  std::shared_ptr<SharedArena> arena;
  CommBackend backend = CommBackend::kMpi;  // of the world, intra and inter communicators
  Device device = Device::cpu();            // where the buffers live (nccl: cuda:local_rank)
  // GPU buffers across nodes (inter_node.hpp, resolved by the caller): kHost stages them to the
  // hosts' socket ring; kNccl and kAuto leave them on `backend`. Host buffers: the socket ring.
  InterNode inter_node = InterNode::kAuto;
  // When set, receives every communicator the algorithm was built over (the watchdog's
  // timeout handler aborts the NCCL ones: a stalled NCCL kernel ends only that way).
  std::vector<std::weak_ptr<Communicator>>* communicators = nullptr;
};

// Builds the algorithm named in `setup` over communicators of the world's groups (world,
// intra, inter) made by make_communicator. `world` must outlive the result. Throws
// InputError for an unknown name or a backend this build lacks.
std::unique_ptr<AllreduceAlgorithm> make_allreduce(const World& world, const AllreduceSetup& setup);
// kNone -> kF32, kFp16 -> kF16, kBf16 -> kBF16.
DType compression_wire_type(Compression compression);

}  // namespace sdp
