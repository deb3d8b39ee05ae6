#include "distributed/allreduce.hpp"

#include <algorithm>
#include <stdexcept>

#include "core/device_memory.hpp"
#include "core/error.hpp"
#ifdef SDP_HAVE_CUDA
#include "core/cuda_casts.hpp"
#endif
#include "distributed/communicator_factory.hpp"
#include "distributed/inter_node.hpp"
#include "distributed/mpi_communicator.hpp"
#include "distributed/reduce_kernels.hpp"
#include "distributed/ring_schedule.hpp"
#include "distributed/shared_arena.hpp"
#include "distributed/shm_collectives.hpp"
#include "distributed/socket_ring.hpp"
#include "distributed/staged_communicator.hpp"
#include "distributed/world.hpp"

namespace sdp {

namespace {

// Every compressed path's arithmetic, written once: the f32 `values` times `pre_scale` cast to
// `wire` in `wire_values` (same device, count elements), summed over the ranks by `sum`, cast
// back times `post_scale`. Host buffers cast on the calling thread and are done on return. GPU
// buffers cast on `casts` (a stream of the buffer's device, ordered after the producer by the
// caller); `sum(on_wire, casts)` starts after the first cast and its Work orders the cast
// back, after which the returned Work completes. The host waits for none of it.
template <class Sum>
std::shared_ptr<Work> sum_in_wire_type(const CommBuffer& values, void* wire_values, DType wire, float pre_scale,
                                       float post_scale, Stream& casts, Sum&& sum) {
  float* f32 = static_cast<float*>(values.data);
  const CommBuffer on_wire{wire_values, values.count, wire, values.device};
  if (values.device.is_cpu()) {
    convert_from_f32(wire, wire_values, f32, values.count, pre_scale);
    sum(on_wire, casts)->wait();
    convert_to_f32(wire, f32, wire_values, values.count, post_scale);
    return completed_work();
  }
#ifdef SDP_HAVE_CUDA
  if (values.device.is_cuda()) {
    cuda_casts::set_device(values.device.index);  // the calling thread's, for the launches
    cuda_casts::from_f32(wire, wire_values, f32, values.count, pre_scale, &casts);
    sum(on_wire, casts)->block_stream(casts);
    cuda_casts::to_f32(wire, f32, wire_values, values.count, post_scale, &casts);
    return work_after(casts);
  }
#endif
  throw std::logic_error("sum_in_wire_type: no casts for buffers on " + values.device.str() + " in this build");
}

// The Work of a host algorithm's last phase, waited for: host buffers are reduced when run returns.
std::shared_ptr<Work> finished(const std::shared_ptr<Work>& work) {
  work->wait();
  return completed_work();
}

}  // namespace

std::shared_ptr<Work> FlatAllreduce::start(const CommBuffer& buffer, ReduceOp op, Stream& stream) {
  world_->stream().wait_for(stream);
  std::shared_ptr<Work> work = world_->allreduce(buffer, {op});
  return buffer.device.is_cpu() ? finished(work) : work;
}

std::shared_ptr<Work> RingAllreduce::start(const CommBuffer& buffer, ReduceOp op, Stream& /*stream*/) {
  // The ring adds segments on the host as they arrive, and pipelines deeper than NCCL's
  // grouped send/recv allow: it is for host memory (and for study).
  if (!buffer.device.is_cpu())
    throw InputError("distributed.allreduce: ring reduces host memory only, not " + buffer.device.str() +
                     "; use flat or hierarchical (NCCL) for GPU buffers");
  const int n = world_->size(), r = world_->rank();
  if (n == 1 || buffer.count == 0) return completed_work();  // an average over one rank is the input
  const std::vector<int64_t> counts = split_counts(buffer.count, n);
  const std::vector<int64_t> offsets = part_offsets(counts);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  const int64_t esize = buffer.element_size();
  const int64_t segment = std::max<int64_t>(1, segment_bytes_ / esize);
  // Incoming segments land in a small ring of slots, reused as soon as a segment has been
  // added: the slots stay in cache, so the add reads them from there, not from memory.
  constexpr int kSlots = 3;
  scratch_.resize(static_cast<std::size_t>(kSlots * segment * esize));
  const CommBuffer slots{scratch_.data(), kSlots * segment, buffer.dtype, buffer.device};
  const PointToPointOptions tag{7601};  // ring-only tag: never matches another layer's messages

  // Reduce-scatter (ring_schedule.hpp): the part I send at step s is the one I completed at
  // step s - 1.
  for (int s = 0; s < n - 1; ++s) {
    const auto [send_part, recv_part] = ring::reduce_scatter_step(r, n, s);
    const float scale = s == n - 2 && op == ReduceOp::kAvg ? 1.0f / n : 1.0f;  // the average, once, fused
    const int64_t in_count = counts[recv_part];
    const int segments = static_cast<int>((in_count + segment - 1) / segment);
    auto segment_len = [&](int k) { return std::min(segment, in_count - k * segment); };
    std::vector<std::shared_ptr<Work>> recvs(segments), sends;
    // Receives are posted before sends so segments find their slot waiting.
    for (int k = 0; k < std::min(kSlots, segments); ++k)
      recvs[k] = world_->recv(slots.slice((k % kSlots) * segment, segment_len(k)), left, tag);
    for (int64_t i = 0; i < counts[send_part]; i += segment)
      sends.push_back(world_->send(buffer.slice(offsets[send_part] + i, std::min(segment, counts[send_part] - i)),
                                   right, tag));
    for (int k = 0; k < segments; ++k) {
      recvs[k]->wait();  // segment k is here; the next ones keep arriving meanwhile
      add_scale_into(buffer.dtype, buffer.slice(offsets[recv_part] + k * segment, 0).data,
                     slots.slice((k % kSlots) * segment, 0).data, segment_len(k), scale);
      if (k + kSlots < segments)
        recvs[k + kSlots] =
            world_->recv(slots.slice((k % kSlots) * segment, segment_len(k + kSlots)), left, tag);
    }
    for (auto& w : sends) w->wait();
  }
  // Allgather: each completed part goes round the ring.
  for (int s = 0; s < n - 1; ++s) {
    const auto [send_part, recv_part] = ring::allgather_step(r, n, s);
    std::vector<std::shared_ptr<Work>> works;
    works.push_back(world_->recv(buffer.slice(offsets[recv_part], counts[recv_part]), left, tag));
    works.push_back(world_->send(buffer.slice(offsets[send_part], counts[send_part]), right, tag));
    for (auto& w : works) w->wait();
  }
  return completed_work();
}

HierarchicalAllreduce::HierarchicalAllreduce(std::shared_ptr<Communicator> intra, std::shared_ptr<Communicator> inter,
                                             std::shared_ptr<SharedArena> arena, DType wire)
    : intra_(std::move(intra)), inter_(std::move(inter)), arena_(std::move(arena)), wire_(wire) {
  if (arena_ && arena_->local_size() != intra_->size())
    throw std::logic_error("HierarchicalAllreduce: the SharedArena spans a different group than intra");
}

HierarchicalAllreduce::~HierarchicalAllreduce() = default;

bool HierarchicalAllreduce::uses_shared_memory(const CommBuffer& buffer) const {
  return arena_ && buffer.device.is_cpu() && arena_->holds(buffer.data, buffer.nbytes());
}

std::shared_ptr<Work> HierarchicalAllreduce::start_on_device(const CommBuffer& buffer, ReduceOp op,
                                                             Stream& stream) {
  // No host arithmetic on GPU buffers: the average is taken on the wire, over the node and
  // then over the nodes (sum / (local x nodes)). Each phase waits for the previous one on the
  // device, the host for none.
  if (wire_ != DType::kF32)  // make_allreduce compresses GPU buffers around the algorithm
    throw std::logic_error("HierarchicalAllreduce: host-side compression of a GPU buffer");
  const std::vector<int64_t> counts = split_counts(buffer.count, intra_->size(), kShmAlign);
  intra_->stream().wait_for(stream);
  std::shared_ptr<Work> scattered = intra_->reduce_scatter(buffer, counts, {op});
  if (inter_->size() > 1) {
    scattered->block_stream(inter_->stream());
    const CommBuffer part = buffer.slice(part_offsets(counts)[intra_->rank()], counts[intra_->rank()]);
    inter_->allreduce(part, {op})->block_stream(intra_->stream());
  }
  return intra_->allgather(buffer, counts);
}

std::shared_ptr<Work> HierarchicalAllreduce::start(const CommBuffer& buffer, ReduceOp op, Stream& stream) {
  if (!buffer.device.is_cpu()) return start_on_device(buffer, op, stream);
  const int local = intra_->size(), nodes = inter_->size();
  const float total = static_cast<float>(local) * static_cast<float>(nodes);
  const float average = op == ReduceOp::kAvg ? 1.0f / total : 1.0f;
  // Parts on cache-line boundaries; the last parts absorb any remainder exactly.
  const std::vector<int64_t> counts = split_counts(buffer.count, local, kShmAlign);
  const int64_t begin = part_offsets(counts)[intra_->rank()];
  const CommBuffer part = buffer.slice(begin, counts[intra_->rank()]);
  const bool shared = uses_shared_memory(buffer);
  if (nodes == 1) {  // the node phase is the whole AllReduce; the average is fused into it
    if (shared) {
      shm_allreduce(*arena_, buffer, average);
    } else {
      intra_->reduce_scatter(buffer, counts, {op})->wait();
      intra_->allgather(buffer, counts)->wait();
    }
    return completed_work();
  }
  // A compressed inter-node phase sums values pre-scaled by 1/size, so the 16-bit sum
  // cannot overflow; reduce_across_nodes undoes it for a SUM. Uncompressed, the exact sum
  // crosses the nodes and the average is applied once, after it.
  const bool compress = wire_ != DType::kF32 && buffer.dtype == DType::kF32;
  const float pre_scale = compress ? 1.0f / total : 1.0f;
  if (shared) {
    shm_reduce_part(*arena_, buffer, counts, pre_scale);
  } else {
    intra_->reduce_scatter(buffer, counts)->wait();
    scale_in_place(buffer.dtype, part.data, part.count, pre_scale);
  }
  reduce_across_nodes(part, op);
  if (!compress) scale_in_place(buffer.dtype, part.data, part.count, average);
  if (shared)
    shm_broadcast_part(*arena_, buffer, counts);
  else
    intra_->allgather(buffer, counts)->wait();
  return completed_work();
}

void HierarchicalAllreduce::reduce_across_nodes(const CommBuffer& part, ReduceOp op) {
  if (wire_ == DType::kF32 || part.dtype != DType::kF32) {
    inter_->allreduce(part)->wait();  // SUM; the caller applies any average
    return;
  }
  // Host memory only (start_on_device handles GPU buffers): done when this returns.
  // The caller pre-scaled the values by 1/total; a SUM is scaled back.
  const float total = static_cast<float>(intra_->size()) * static_cast<float>(inter_->size());
  scratch_.resize(static_cast<std::size_t>(part.count));
  sum_in_wire_type(part, scratch_.data(), wire_, 1.0f, op == ReduceOp::kSum ? total : 1.0f, host_stream(),
                   [&](const CommBuffer& on_wire, Stream&) { return finished(inter_->allreduce(on_wire)); });
}

std::shared_ptr<Work> CompressedAllreduce::start(const CommBuffer& buffer, ReduceOp op, Stream& stream) {
  if (buffer.dtype != DType::kF32) throw std::logic_error("CompressedAllreduce: input must be f32");
  const float n = static_cast<float>(world_size_);
  void* wire_values = nullptr;
  Stream* casts = &host_stream();
  if (buffer.device.is_cpu()) {
    scratch_.resize(static_cast<std::size_t>(buffer.count));
    wire_values = scratch_.data();
  } else {
    if (!casts_) casts_ = make_stream(buffer.device);
    casts = casts_.get();
    casts->wait_for(stream);
    // One scratch for every bucket: a bucket's first cast is queued on `casts` after the
    // previous bucket's cast back, which waited for that bucket's sum.
    const std::size_t bytes = static_cast<std::size_t>(buffer.count) * dtype_size(wire_);
    if (device_scratch_bytes_ < bytes) {  // the first buckets only: then it has its size
      casts->synchronize();               // the old scratch may still be in use
      device_scratch_ = allocate(buffer.device, bytes);
      device_scratch_bytes_ = bytes;
    }
    wire_values = device_scratch_.get();
  }
  // Pre-scaled by 1/ranks so that the 16-bit sum stays in range; a SUM is scaled back.
  return sum_in_wire_type(buffer, wire_values, wire_, 1.0f / n, op == ReduceOp::kSum ? n : 1.0f, *casts,
                          [&](const CommBuffer& on_wire, Stream& after) {
                            return inner_->run(on_wire, ReduceOp::kSum, after);
                          });
}

AllreduceAlgorithm& AutoAllreduce::choose(const CommBuffer& buffer) const {
  if (multi_node_ && buffer.nbytes() < kAutoFlatBelowBytes) return *flat_;
  if (hierarchical_->uses_shared_memory(buffer) || multi_) return *hierarchical_;
  return *flat_;
}

DType compression_wire_type(Compression compression) {
  switch (compression) {
    case Compression::kAuto:
      throw std::logic_error("compression_wire_type: resolve compression: auto first (resolve_compression)");
    case Compression::kNone:
      return DType::kF32;
    case Compression::kFp16:
      return DType::kF16;
    case Compression::kBf16:
      return DType::kBF16;
  }
  throw std::logic_error("compression_wire_type: unhandled Compression");
}

namespace {

// make_allreduce's parts: the communicators an algorithm needs, made only when it needs them
// (under NCCL each is a communicator init, and making one is collective: every rank asks for
// the same ones in the same order), and the 16-bit wrapping.
class AllreduceBuilder {
 public:
  AllreduceBuilder(const World& world, const AllreduceSetup& setup)
      : world_(world),
        setup_(setup),
        // Host buffers compress inside the algorithms (hierarchical: only across nodes, where the
        // bytes are slow); GPU buffers compress around the whole algorithm, NCCL in 16 bits.
        wire_(setup.device.is_cpu() ? compression_wire_type(setup.compression) : DType::kF32),
        backend_(resolve_comm_backend(setup.backend, setup.device)),
        // Whatever spans the world moves host memory (MPI) when the inter-node phase runs on the
        // hosts (inter_node.hpp): CPU jobs, and GPU jobs that cross the nodes through the hosts.
        across_world_(world_backend(backend_, setup.inter_node, setup.device, world.nodes())),
        inter_on_hosts_(world.nodes() > 1 && across_world_ == CommBackend::kMpi) {}

  std::unique_ptr<AllreduceAlgorithm> algorithm() {
    switch (setup_.algorithm) {
      case AllreduceKind::kFlat:
        return compressed(std::make_unique<FlatAllreduce>(world_comm()));
      case AllreduceKind::kRing:
        return compressed(std::make_unique<RingAllreduce>(world_comm()));
      case AllreduceKind::kHierarchical:
        return hierarchical();
      case AllreduceKind::kAuto: {
        // In this order on every rank: making a communicator is collective.
        std::unique_ptr<AllreduceAlgorithm> flat = compressed(std::make_unique<FlatAllreduce>(world_comm()));
        std::unique_ptr<HierarchicalAllreduce> node_first = hierarchical();
        return std::make_unique<AutoAllreduce>(std::move(flat), std::move(node_first),
                                               world_.nodes() > 1 && world_.local_size() > 1, world_.nodes() > 1);
      }
    }
    throw std::logic_error("make_allreduce: unhandled AllreduceKind");
  }

 private:
  std::shared_ptr<Communicator> report(std::shared_ptr<Communicator> made) const {
    if (setup_.communicators != nullptr) setup_.communicators->push_back(made);
    return made;
  }
  std::shared_ptr<Communicator> communicator(MPI_Comm group, const char* label, CommBackend over) const {
    CommunicatorOptions options;
    options.label = label;
    options.device = setup_.device;
    return report(make_communicator(over, group, options));
  }
  std::shared_ptr<Communicator> world_comm() const { return communicator(world_.comm(), "world", across_world_); }
  // Across nodes over host memory: the TCP socket ring (socket_ring.hpp) for the allreduce when
  // every rank connects, else MPI; GPU buffers staged through pinned memory in rounds.
  std::shared_ptr<Communicator> host_inter_comm() const {
    std::shared_ptr<Communicator> host = std::make_shared<MpiCommunicator>(world_.inter(), "inter");
    if (std::unique_ptr<SocketRing> ring = SocketRing::create(world_.inter(), world_.comm()))
      host = std::make_shared<SocketRingCommunicator>(std::move(ring), host);
    if (setup_.device.is_cpu()) return report(host);
    return report(std::make_shared<StagedCommunicator>(host, make_stream(setup_.device)));
  }
  std::unique_ptr<AllreduceAlgorithm> compressed(std::unique_ptr<AllreduceAlgorithm> inner) const {
    if (wire_ == DType::kF32 || world_.size() == 1) return inner;
    return std::make_unique<CompressedAllreduce>(std::move(inner), wire_, world_.size());
  }
  std::unique_ptr<HierarchicalAllreduce> hierarchical() const {
    // An arena of another group (e.g. made before a ranks_per_node override) is not used.
    std::shared_ptr<SharedArena> arena =
        setup_.arena && setup_.arena->local_size() == world_.local_size() ? setup_.arena : nullptr;
    std::shared_ptr<Communicator> intra = communicator(world_.intra(), "intra", backend_);
    std::shared_ptr<Communicator> inter =
        inter_on_hosts_ ? host_inter_comm() : communicator(world_.inter(), "inter", backend_);
    return std::make_unique<HierarchicalAllreduce>(std::move(intra), std::move(inter), arena, wire_);
  }

  const World& world_;
  const AllreduceSetup& setup_;
  const DType wire_;
  const CommBackend backend_, across_world_;
  const bool inter_on_hosts_;
};

}  // namespace

std::unique_ptr<AllreduceAlgorithm> make_allreduce(const World& world, const AllreduceSetup& setup) {
  std::unique_ptr<AllreduceAlgorithm> algorithm = AllreduceBuilder(world, setup).algorithm();
  // GPU buffers: the whole algorithm in 16 bits (host buffers compressed inside it).
  const DType gpu_wire = setup.device.is_cpu() ? DType::kF32 : compression_wire_type(setup.compression);
  if (gpu_wire == DType::kF32 || world.size() == 1) return algorithm;
  return std::make_unique<CompressedAllreduce>(std::move(algorithm), gpu_wire, world.size());
}

}  // namespace sdp
