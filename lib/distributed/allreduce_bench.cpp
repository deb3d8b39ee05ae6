#include "distributed/allreduce_bench.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <utility>

#include "core/device_memory.hpp"
#include "core/error.hpp"
#include "distributed/allreduce.hpp"
#include "distributed/communicator_factory.hpp"
#include "distributed/mpi_check.hpp"
#include "distributed/mpi_communicator.hpp"
#include "distributed/shared_arena.hpp"
#include "distributed/world.hpp"

namespace sdp {

namespace {

// Small integers: any sum over up to 2^20 ranks is exact in f32.
float input_value(int rank, int64_t i) { return static_cast<float>((i * 7 + rank * 13) % 17 - 8); }

void fill(float* data, int64_t count, int rank) {
  for (int64_t i = 0; i < count; ++i) data[i] = input_value(rank, i);
}

double max_error(const float* data, int64_t count, int size) {
  double worst = 0;
  for (int64_t i = 0; i < count; ++i) {
    double expected = 0;
    for (int r = 0; r < size; ++r) expected += input_value(r, i);
    worst = std::max(worst, std::fabs(static_cast<double>(data[i]) - expected));
  }
  return worst;
}

double max_over_ranks(double v, MPI_Comm comm) {
  double out = 0;
  SDP_MPI_CHECK(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, comm));
  return out;
}

// Node memory bandwidth: every local rank copies 64 MiB at once; read + written bytes / time.
double measure_node_copy_gbs(const World& world) {
  const std::size_t bytes = 64 << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    SDP_MPI_CHECK(MPI_Barrier(world.intra()));
    const double t0 = MPI_Wtime();
    std::memcpy(dst.data(), src.data(), bytes);
    best = std::min(best, max_over_ranks(MPI_Wtime() - t0, world.intra()));
  }
  return 2.0 * bytes * world.local_size() / best / 1e9;
}

enum class RunKind { kAlgorithm, kPeer, kHostBound };
struct Run {
  std::string name;
  std::unique_ptr<AllreduceAlgorithm> algorithm;  // kAlgorithm only
  RunKind kind = RunKind::kAlgorithm;
};

// The benchmark's buffer and the rows it times at each size. `host` is where values are filled
// and checked; `data` is what the collectives reduce: `host`, or GPU memory on a GPU.
class AllreduceBench {
 public:
  AllreduceBench(const World& world, const AllreduceBenchOptions& options)
      : world_(world), options_(options), on_gpu_(options.device.is_cuda()) {
    const int64_t max_count = options.max_bytes / 4;
    if (options.shared_memory && !on_gpu_) {  // where the trainer puts the gradient arena
      arena_ = SharedArena::create(world.intra(), max_count * 4);
      host_ = static_cast<float*>(arena_->data());
    } else {
      heap_.resize(static_cast<std::size_t>(max_count));
      host_ = heap_.data();
    }
    data_ = host_;
    const bool nccl = on_gpu_ && options.gpu_backend == CommBackend::kNccl;
    if (on_gpu_) {
      gpu_buffer_ = allocate(options.device, static_cast<std::size_t>(max_count) * 4);
      data_ = static_cast<float*>(gpu_buffer_.get());
      if (nccl) nccl_world_ = make_communicator(CommBackend::kNccl, world.comm(), {"world", options.device});
      mpi_world_ = std::make_shared<MpiCommunicator>(world.comm(), "world");
    }
    // The rows of each size, in order: the peer first (vs_mpi is relative to it). On GPUs whose
    // ranks share them (no NCCL), the peer is the host path's own bound.
    if (options.mpi_peer) runs_.push_back({on_gpu_ ? (nccl ? "nccl" : "host-bound") : "mpi", nullptr,
                                           on_gpu_ && !nccl ? RunKind::kHostBound : RunKind::kPeer});
    for (AllreduceKind kind : options.algorithms) {
      if (on_gpu_ && kind == AllreduceKind::kRing) continue;  // host-only (allreduce.cpp)
      AllreduceSetup setup{kind, options.compression, arena_};
      if (on_gpu_) {
        setup.backend = options.gpu_backend;
        setup.device = options.device;
        setup.inter_node = options.inter_node;
      }
      runs_.push_back({to_string(kind), make_allreduce(world, setup), RunKind::kAlgorithm});
    }
    if (on_gpu_ && options.mpi_peer) {
      // The GPU paths through host memory, next to NCCL: Open MPI's allreduce on staged rounds
      // (staged_communicator.hpp); the hierarchical AllReduce with its inter-node phase on the
      // hosts (inter_node.hpp); and, under NCCL, the bound those are measured against.
      CommunicatorOptions staged{"world", options.device};
      if (nccl)  // else "flat" is this row already
        runs_.push_back({"mpi-staged",
                         std::make_unique<FlatAllreduce>(make_communicator(CommBackend::kMpi, world.comm(), staged)),
                         RunKind::kAlgorithm});
      if (world.nodes() > 1) {
        AllreduceSetup setup{AllreduceKind::kHierarchical, options.compression, nullptr, options.gpu_backend,
                             options.device, InterNode::kHost};
        runs_.push_back({"hier-host", make_allreduce(world, setup), RunKind::kAlgorithm});
      }
      if (nccl) runs_.push_back({"host-bound", nullptr, RunKind::kHostBound});
    }
  }

  // The peer's name for the table: NCCL's communicator on a GPU, else empty (MPI's version).
  std::string gpu_peer() const {
    if (nccl_world_) return "ncclAllReduce of " + nccl_world_->name();
    return on_gpu_ ? "the copies to and from the host plus MPI_Allreduce of host memory, one after the other" : "";
  }

  // One row per algorithm at `bytes`, the peer's first; vs_mpi relative to the peer.
  std::vector<AllreduceBenchRow> measure_size(int64_t bytes) {
    const int64_t count = bytes / 4;
    const int iters = bytes <= (8 << 20) ? options_.iters
                                         : std::max<int>(5, static_cast<int>(options_.iters * (8.0 * (1 << 20)) / bytes));
    std::vector<AllreduceBenchRow> rows;
    double peer_busbw = 0;
    for (Run& run : runs_) {
      rows.push_back(measure(run, count, iters));
      if (&run == &runs_.front() && run.kind != RunKind::kAlgorithm) peer_busbw = rows.back().busbw_gbs;
    }
    if (peer_busbw > 0)
      for (auto& row : rows) row.vs_mpi = row.busbw_gbs / peer_busbw;
    return rows;
  }

 private:
  // Fills the input (untimed) and, on a GPU, copies it there.
  void refill(int64_t count) {
    fill(host_, count, world_.rank());
    if (on_gpu_) copy_bytes(options_.device, data_, Device::cpu(), host_, static_cast<std::size_t>(count) * 4);
  }

  // One AllReduce of `count` elements: the run's algorithm; the peer (MPI_Allreduce, or one
  // ncclAllReduce on the world's NCCL communicator); or the host bound: the whole buffer to the
  // host, MPI_Allreduce there, and back, each step waiting for the last (no overlap).
  void run_once(const Run& run, int64_t count) {
    const CommBuffer buffer{data_, count, DType::kF32, options_.device};
    const std::size_t bytes = static_cast<std::size_t>(count) * 4;
    switch (run.kind) {
      case RunKind::kAlgorithm:
        run.algorithm->run(buffer, ReduceOp::kSum)->wait();
        return;
      case RunKind::kPeer:
        if (on_gpu_)
          nccl_world_->allreduce(buffer)->wait();
        else
          SDP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data_, static_cast<int>(count), MPI_FLOAT, MPI_SUM, world_.comm()));
        return;
      case RunKind::kHostBound:
        if (bounce_.size() < static_cast<std::size_t>(count)) bounce_.resize(static_cast<std::size_t>(count));
        copy_bytes(Device::cpu(), bounce_.data(), options_.device, data_, bytes);
        mpi_world_->allreduce(CommBuffer::host(bounce_.data(), count))->wait();
        copy_bytes(options_.device, data_, Device::cpu(), bounce_.data(), bytes);
        return;
    }
  }

  AllreduceBenchRow measure(const Run& run, int64_t count, int iters) {
    const int n = world_.size();
    // SUM in place multiplies the values by ~n per iteration: refill (untimed) before they
    // could leave the range where f32 stays finite.
    const int block = std::max(1, static_cast<int>(60 / std::max(1.0, std::log2(static_cast<double>(n)))));
    refill(count);
    for (int i = 0; i < options_.warmup; ++i) run_once(run, count);
    double elapsed = 0;
    for (int done = 0; done < iters;) {
      refill(count);
      const int k = std::min(block, iters - done);
      SDP_MPI_CHECK(MPI_Barrier(world_.comm()));
      const double t0 = MPI_Wtime();
      for (int i = 0; i < k; ++i) run_once(run, count);
      elapsed += MPI_Wtime() - t0;
      done += k;
    }
    // One more, untimed, from fresh input: its result is the one checked.
    refill(count);
    run_once(run, count);
    if (on_gpu_) copy_bytes(Device::cpu(), host_, options_.device, data_, static_cast<std::size_t>(count) * 4);
    AllreduceBenchRow row;
    row.bytes = count * 4;
    row.count = count;
    row.algorithm = run.name;
    row.ran = run.name;
    if (auto* a = dynamic_cast<AutoAllreduce*>(run.algorithm.get()))
      row.ran = a->choice({data_, count, DType::kF32, options_.device});
    row.max_error = max_over_ranks(max_error(host_, count, n), world_.comm());
    row.time_us = max_over_ranks(elapsed / iters, world_.comm()) * 1e6;
    row.algbw_gbs = row.time_us > 0 ? row.bytes / (row.time_us * 1e-6) / 1e9 : 0;
    row.busbw_gbs = row.algbw_gbs * 2.0 * (n - 1) / n;
    return row;
  }

  const World& world_;
  const AllreduceBenchOptions& options_;
  bool on_gpu_;
  std::shared_ptr<SharedArena> arena_;
  std::vector<float> heap_;
  std::shared_ptr<void> gpu_buffer_;
  float* host_ = nullptr;
  float* data_ = nullptr;
  std::shared_ptr<Communicator> nccl_world_, mpi_world_;
  std::vector<float> bounce_;  // the host bound's host copy
  std::vector<Run> runs_;
};

}  // namespace

AllreduceBenchResult run_allreduce_benchmark(const World& world, const AllreduceBenchOptions& options) {
  if (options.min_bytes < 4 || options.max_bytes < options.min_bytes || options.factor < 2)
    throw InputError("bench allreduce: need 4 <= min-bytes <= max-bytes and factor >= 2");
  AllreduceBenchResult result;
  result.options = options;
  result.ranks = world.size();
  result.nodes = world.nodes();
  result.local_size = world.local_size();
  result.peer = mpi_library_version();
  result.node_copy_gbs = measure_node_copy_gbs(world);
  AllreduceBench bench(world, options);
  if (!bench.gpu_peer().empty()) result.peer = bench.gpu_peer();
  for (int64_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= options.factor)
    for (AllreduceBenchRow& row : bench.measure_size(bytes)) result.rows.push_back(row);
  return result;
}

void parse_bench_algorithms(const std::string& csv, AllreduceBenchOptions& options) {
  options.mpi_peer = false;
  options.algorithms.clear();
  std::stringstream list(csv);
  for (std::string name; std::getline(list, name, ',');) {
    if (name.empty()) continue;
    if (name == "mpi") {
      options.mpi_peer = true;
      continue;
    }
    try {
      options.algorithms.push_back(parse_choice<AllreduceKind>(name));
    } catch (const InputError&) {
      throw InputError("--algorithms: unknown algorithm '" + name +
                       "' (expected a comma-separated subset of mpi,flat,ring,hierarchical,auto)");
    }
  }
}

std::string format_allreduce_table(const AllreduceBenchResult& r) {
  std::string out;
  char line[256];
  std::snprintf(
      line, sizeof line,
      "# sdp-train bench allreduce: %d ranks (%d node%s x %d), float32 sum, in place%s%s\n",
      r.ranks, r.nodes, r.nodes == 1 ? "" : "s", r.local_size,
      r.options.device.is_cuda()          ? ", buffers in GPU memory (NCCL)"
      : r.options.shared_memory          ? ", buffers in node-shared memory"
                                         : "",
      r.options.compression != Compression::kNone
          ? (", compression " + to_string(r.options.compression)).c_str()
          : "");
  out += line;
  if (r.options.device.is_cpu())
    out += "# peer \"mpi\": MPI_Allreduce of " + r.peer + "; vs_mpi = busbw / busbw(mpi)\n";
  else if (r.options.gpu_backend == CommBackend::kNccl)
    out += "# peer \"nccl\": " + r.peer + " alone; vs_mpi = busbw / busbw(nccl); \"host-bound\": the copies "
           "to and from the host plus MPI_Allreduce of host memory, one after the other\n";
  else
    out += "# peer \"host-bound\": " + r.peer + " (ranks share GPUs: no NCCL); vs_mpi = busbw / busbw(host-bound)\n";
  // An in-place allreduce on one node must at least read n inputs and write n outputs of S
  // bytes: algbw <= copy bandwidth / (2n). %mem compares with that bound.
  const double bound = r.node_copy_gbs / (2.0 * r.local_size);
  std::snprintf(line, sizeof line,
                "# node memory: %.1f GB/s memcpy read+write with %d ranks copying; in-place bound algbw %.2f GB/s "
                "(= copy / 2n)\n",
                r.node_copy_gbs, r.local_size, bound);
  out += line;
  std::snprintf(line, sizeof line, "#%13s %13s %-14s %11s %11s %11s %9s %7s %6s\n", "size(B)", "count(elems)",
                "algorithm", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "max_err", "vs_mpi", "%mem");
  out += line;
  for (const auto& row : r.rows) {
    const std::string name = row.ran != row.algorithm ? row.algorithm + ">" + row.ran.substr(0, 4) : row.algorithm;
    char ratio[16] = "-";
    if (row.vs_mpi > 0) std::snprintf(ratio, sizeof ratio, "%.2f", row.vs_mpi);
    char mem[16] = "-";
    if (r.nodes == 1 && bound > 0 && r.options.device.is_cpu())  // a host-memory bound
      std::snprintf(mem, sizeof mem, "%.0f", 100.0 * row.algbw_gbs / bound);
    std::snprintf(line, sizeof line, " %13lld %13lld %-14s %11.1f %11.2f %11.2f %9.3g %7s %6s\n",
                  static_cast<long long>(row.bytes), static_cast<long long>(row.count), name.c_str(), row.time_us,
                  row.algbw_gbs, row.busbw_gbs, row.max_error, ratio, mem);
    out += line;
  }
  return out;
}

}  // namespace sdp
