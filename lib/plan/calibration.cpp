#include "plan/calibration.hpp"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/clock.hpp"
#include "core/dtype.hpp"
#include "distributed/allreduce.hpp"
#include "distributed/allreduce_bench.hpp"
#include "distributed/collectives.hpp"
#include "distributed/device_assignment.hpp"
#include "distributed/mpi_communicator.hpp"
#include "distributed/reduce_kernels.hpp"
#include "distributed/shared_arena.hpp"
#include "distributed/socket_ring.hpp"
#include "distributed/world.hpp"

namespace sdp::plan {

namespace {

using Clock = std::chrono::steady_clock;

// Median one-way time of `bytes` between world ranks a and b (others return 0). Each side
// waits as the job's sends and receives do (default_mpi_wait): under a CPU quota a receive
// that spun would spend the quota and wait out the throttled rest of the period (on 4
// simulated hosts of 0.45 CPUs, 8 bytes then took 1.2 ms one way, 4 KiB 22 us).
double one_way_seconds(const World& world, int a, int b, int64_t bytes, int iters) {
  std::vector<char> buffer(static_cast<std::size_t>(bytes));
  std::vector<double> samples;
  const int me = world.rank();
  if (me != a && me != b) return 0;
  const int peer = me == a ? b : a;
  const MpiWait how = default_mpi_wait();
  std::vector<MPI_Request> request(1);
  const auto send = [&] {
    MPI_Isend(buffer.data(), static_cast<int>(bytes), MPI_CHAR, peer, 7, MPI_COMM_WORLD, request.data());
    wait_all(request, how);
  };
  const auto receive = [&] {
    MPI_Irecv(buffer.data(), static_cast<int>(bytes), MPI_CHAR, peer, 7, MPI_COMM_WORLD, request.data());
    wait_all(request, how);
  };
  for (int i = 0; i < iters + 1; ++i) {
    const auto start = Clock::now();
    if (me == a) {
      send();
      receive();
    } else {
      receive();
      send();
    }
    if (i > 0) samples.push_back(seconds_since(start) / 2);  // the first warms the connection
  }
  return median_seconds(std::move(samples));
}

// The node phase as the job runs it: the runner's own algorithm over gradients in the
// node-shared arena (allreduce_bench.hpp), 4 KiB to 64 MiB, slowest rank. One node: "auto"
// (the shared-memory node phase) is all there is. Several: "hierarchical" less the model's
// inter-node phase on the link just measured, so the curve holds the node phases alone.
std::vector<std::pair<double, double>> intra_curve(const World& world, const Network& link) {
  AllreduceBenchOptions options;
  options.min_bytes = 4 << 10;
  options.max_bytes = 64 << 20;
  options.factor = 4;
  options.warmup = 2;
  options.iters = 10;
  options.mpi_peer = false;
  options.algorithms = {world.nodes() > 1 ? AllreduceKind::kHierarchical : AllreduceKind::kAuto};
  const AllreduceBenchResult result = run_allreduce_benchmark(world, options);
  std::vector<std::pair<double, double>> points;
  const double nodes = world.nodes();
  Network host = link;  // the socket ring's measured steps count for a host job
  host.rendezvous_above_bytes = kMpiTcpEagerBytes;
  for (const AllreduceBenchRow& row : result.rows) {
    double seconds = row.time_us * 1e-6;
    if (world.nodes() > 1) seconds -= 2 * (nodes - 1) * host.socket_step_seconds(row.bytes / nodes);
    points.emplace_back(static_cast<double>(row.bytes), std::max(seconds, 0.0));
  }
  return points;
}

// The slowest rank's median time of `collective` over `iters` runs, every rank starting each
// together (as a bucket's AllReduce does), after one run that warms the connections.
template <class Collective>
double slowest_median_seconds(const World& world, int iters, Collective&& collective) {
  const MpiWait how = default_mpi_wait();
  std::vector<double> samples;
  for (int i = 0; i < iters + 1; ++i) {
    mpi_barrier(world.comm(), how);
    const auto start = Clock::now();
    collective();
    if (i > 0) samples.push_back(seconds_since(start));
  }
  double seconds = median_seconds(std::move(samples));
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, world.comm());
  return seconds;
}

// One step of the hierarchical AllReduce's inter-node socket ring, by the bytes each node
// sends in it: every local rank's ring at once over its shard of AllReduces of 8 KiB to
// 16 MiB a node, as the job runs them (allreduce.cpp, host_inter_comm), the slowest rank's
// median over the 2(N-1) steps. Empty when there is no ring (SDP_INTER_TRANSPORT=mpi, or a
// rank could not connect): the job then crosses through MPI.
std::vector<std::pair<double, double>> socket_step_curve(const World& world) {
  const std::unique_ptr<SocketRing> ring = SocketRing::create(world.inter(), world.comm());
  if (!ring) return {};
  const double nodes = world.nodes();
  const int64_t local = world.local_size();
  const std::vector<int64_t> node_bytes = {8 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20};
  std::vector<float> shard(static_cast<std::size_t>(node_bytes.back() / 4 / local + 1), 0.0f);
  std::vector<std::pair<double, double>> points;
  for (int64_t bytes : node_bytes) {
    const int64_t count = std::max<int64_t>(1, bytes / 4 / local);
    const double seconds = slowest_median_seconds(world, bytes >= (4 << 20) ? 3 : 10,
                                                  [&] { ring->allreduce(CommBuffer::host(shard.data(), count)); });
    points.emplace_back(static_cast<double>(bytes) / nodes, seconds / (2 * (nodes - 1)));
  }
  return points;
}

// One step of `kind` (kRing: the runner's ring over MPI; kFlat: MPI_Allreduce, whichever
// algorithm Open MPI takes, counted as the ring's steps) over all the world's ranks, by the
// bytes each rank sends in it: AllReduces of 2(n-1) steps of 8 KiB to 8 MiB, every rank at once
// as the job runs them, the slowest rank's median over the 2(n-1) steps. Each step sends and
// receives at once: both directions of every link busy, where the ping-pong loads one (on the
// simulated hosts' 10 Gbit/s wires a ring step of 512 KiB took 1.1-1.3 ms, a message one way
// 0.8-0.94).
std::vector<std::pair<double, double>> mpi_step_curve(const World& world, AllreduceKind kind) {
  AllreduceSetup setup;
  setup.algorithm = kind;
  const std::unique_ptr<AllreduceAlgorithm> algorithm = make_allreduce(world, setup);
  const int64_t n = world.size();
  const std::vector<int64_t> step_bytes = {8 << 10, 32 << 10, 128 << 10, 512 << 10, 2 << 20, 8 << 20};
  std::vector<float> data(static_cast<std::size_t>(step_bytes.back() / 4 * n), 0.0f);
  std::vector<std::pair<double, double>> points;
  for (int64_t bytes : step_bytes) {
    const int64_t count = bytes / 4 * n;
    const double seconds = slowest_median_seconds(world, bytes >= (2 << 20) ? 3 : 10, [&] {
      algorithm->run(CommBuffer::host(data.data(), count), ReduceOp::kSum)->wait();
    });
    points.emplace_back(static_cast<double>(bytes), seconds / static_cast<double>(2 * (n - 1)));
  }
  return points;
}

double convert_rate() {
  const int64_t count = 4 << 20;  // 16 MiB of f32
  std::vector<float> f32(static_cast<std::size_t>(count), 1.0f);
  std::vector<uint16_t> f16(static_cast<std::size_t>(count));
  std::vector<double> samples;
  for (int i = 0; i < 6; ++i) {
    const auto start = Clock::now();
    convert_from_f32(DType::kF16, f16.data(), f32.data(), count, 1.0f);
    convert_to_f32(DType::kF16, f32.data(), f16.data(), count, 1.0f);
    if (i > 0) samples.push_back(seconds_since(start) / 2);
  }
  return static_cast<double>(count * 4) / median_seconds(std::move(samples));
}

// Threads standing in for the job's compute threads on the rank's CPUs: each counts the
// chunks of arithmetic it has done, so the progress of a window says how much of the cores
// they had in it.
class CoreLoad {
 public:
  explicit CoreLoad(int threads) : counters_(static_cast<std::size_t>(threads)) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this, i] { spin(counters_[i].chunks); });
  }
  ~CoreLoad() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
  }
  CoreLoad(const CoreLoad&) = delete;
  CoreLoad& operator=(const CoreLoad&) = delete;
  double progress() const {
    double sum = 0;
    for (const Counter& c : counters_) sum += static_cast<double>(c.chunks.load(std::memory_order_relaxed));
    return sum;
  }

 private:
  struct alignas(64) Counter {
    std::atomic<uint64_t> chunks{0};
  };
  void spin(std::atomic<uint64_t>& chunks) {
    volatile double x = 1;  // a dependent chain the compiler cannot fold
    while (!stop_.load(std::memory_order_relaxed)) {
      for (int k = 0; k < 20000; ++k) x = x * 1.0000001 + 1e-9;
      chunks.fetch_add(1, std::memory_order_relaxed);
    }
  }
  std::vector<Counter> counters_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
};

// What communication costs a rank whose compute threads fill its CPUs (SharedCoreCosts):
// the runner's AllReduce as a host job runs it (over the gradient arena's node-shared memory),
// first on idle cores, then with `compute_threads` threads busy:
//   latency   an 8-byte AllReduce's extra time (hierarchical across nodes), per message it
//             sends in sequence;
//   per byte  for each algorithm (across nodes flat, ring and hierarchical, whose CPU costs
//             differ: MPI polls, the socket ring sleeps; on one node the node phase they all
//             run), the load's progress lost while 16 MiB AllReduces run, against its progress
//             in a window as long with the rank idle next to it, per byte AllReduced (median
//             of 5 pairs of windows, mean over the ranks);
//   link share  for each algorithm, its 16 MiB AllReduce's time on idle cores over its time
//             on the busy ones (slowest rank, median of the 5 windows).
// (Link shares and costs are measured across nodes; on one node the link plays no part.)
void measure_shared_core(const World& world, int compute_threads, Network& network) {
  const int64_t count = 4 << 20;  // 16 MiB of f32
  const std::shared_ptr<SharedArena> arena = SharedArena::create(world.intra(), count * 4);
  float* data = static_cast<float*>(arena->data());
  std::fill(data, data + count, 0.0f);
  const bool multi_node = world.nodes() > 1;
  const std::vector<AllreduceKind> kinds =
      multi_node ? std::vector<AllreduceKind>{AllreduceKind::kFlat, AllreduceKind::kRing, AllreduceKind::kHierarchical}
                 : std::vector<AllreduceKind>{AllreduceKind::kAuto};
  std::vector<std::unique_ptr<AllreduceAlgorithm>> algorithms;
  for (AllreduceKind kind : kinds) algorithms.push_back(make_allreduce(world, {kind, Compression::kNone, arena}));
  const auto allreduce = [&](AllreduceAlgorithm& algorithm, int64_t n) {
    algorithm.run(CommBuffer::host(data, n), ReduceOp::kSum)->wait();
  };
  AllreduceAlgorithm& latency_algorithm = *algorithms.back();  // hierarchical, or the node phase
  const auto small_seconds = [&] {
    std::vector<double> samples;
    for (int i = 0; i < 31; ++i) {
      const auto start = Clock::now();
      allreduce(latency_algorithm, 2);
      samples.push_back(seconds_since(start));
    }
    return median_seconds(std::move(samples));
  };
  // Connections and pages warm; then each algorithm's 16 MiB AllReduce on idle cores (the
  // faster of two), and as many as take about 0.2 s in each busy window (the same count on
  // every rank).
  std::vector<double> one(kinds.size());
  for (std::size_t k = 0; k < kinds.size(); ++k) {
    allreduce(*algorithms[k], count);
    one[k] = 1e30;
    for (int i = 0; i < 2; ++i) {
      MPI_Barrier(world.comm());
      const auto start = Clock::now();
      allreduce(*algorithms[k], count);
      one[k] = std::min(one[k], seconds_since(start));
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, one.data(), static_cast<int>(one.size()), MPI_DOUBLE, MPI_MAX, world.comm());
  MPI_Barrier(world.comm());
  const double idle_small = small_seconds();

  CoreLoad load(std::max(1, compute_threads));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  MPI_Barrier(world.comm());
  const double busy_small = small_seconds();
  std::vector<double> figures, busy_seconds;  // per byte of each kind; one busy AllReduce of each
  for (std::size_t k = 0; k < kinds.size(); ++k) {
    const int iters = std::clamp(static_cast<int>(std::ceil(0.2 / std::max(one[k], 1e-6))), 2, 20);
    std::vector<double> lost_per_byte, busy_one;
    for (int rep = 0; rep < 5; ++rep) {
      MPI_Barrier(world.comm());
      double p0 = load.progress();
      auto start = Clock::now();
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      const double idle_rate = (load.progress() - p0) / seconds_since(start);
      MPI_Barrier(world.comm());
      p0 = load.progress();
      start = Clock::now();
      for (int i = 0; i < iters; ++i) allreduce(*algorithms[k], count);
      const double window = seconds_since(start), busy_rate = (load.progress() - p0) / window;
      busy_one.push_back(window / iters);
      const double lost = idle_rate > 0 ? std::max(0.0, 1 - busy_rate / idle_rate) * window : 0.0;
      lost_per_byte.push_back(lost / (static_cast<double>(iters) * static_cast<double>(count) * 4));
    }
    figures.push_back(median_seconds(std::move(lost_per_byte)) / world.size());
    busy_seconds.push_back(median_seconds(std::move(busy_one)));
  }
  MPI_Allreduce(MPI_IN_PLACE, figures.data(), static_cast<int>(figures.size()), MPI_DOUBLE, MPI_SUM, world.comm());
  MPI_Allreduce(MPI_IN_PLACE, busy_seconds.data(), static_cast<int>(busy_seconds.size()), MPI_DOUBLE, MPI_MAX,
                world.comm());
  double extra = std::max(0.0, busy_small - idle_small);
  MPI_Bcast(&extra, 1, MPI_DOUBLE, 0, world.comm());
  // The messages an 8-byte AllReduce sends one after the other: the inter-node ring's 2(N-1),
  // or the node phase's steps on one node.
  const int messages = multi_node ? 2 * (world.nodes() - 1) : std::max(1, 2 * (world.local_size() - 1));
  network.shared_core.latency_s = extra / messages;
  for (AllreduceKind kind : {AllreduceKind::kFlat, AllreduceKind::kRing, AllreduceKind::kHierarchical}) {
    const std::size_t k =
        multi_node ? static_cast<std::size_t>(std::find(kinds.begin(), kinds.end(), kind) - kinds.begin()) : 0;
    network.shared_core.s_per_byte[kind] = figures[k];
    network.shared_core.link_share[kind] =
        multi_node && busy_seconds[k] > 0 ? std::min(1.0, one[k] / busy_seconds[k]) : 1.0;
  }
  network.shared_core.measured = true;
}

}  // namespace

Machines machines_of(const World& world) {
  const MachineShare share = share_machine(MPI_COMM_WORLD);
  Machines m;
  const int first = share.machine_world_ranks.front() == world.rank() ? 1 : 0;
  MPI_Allreduce(&first, &m.count, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  // The most ranks per CPU, read from every rank's machine.
  const std::vector<int> ranks = allgather_ints(MPI_COMM_WORLD, share.machine_ranks);
  const std::vector<int> cpus = allgather_ints(MPI_COMM_WORLD, share.machine_cpus);
  std::size_t crowded = 0;
  for (std::size_t r = 1; r < ranks.size(); ++r)
    if (static_cast<int64_t>(ranks[r]) * cpus[crowded] > static_cast<int64_t>(ranks[crowded]) * cpus[r]) crowded = r;
  m.ranks = ranks[crowded];
  m.cpus = cpus[crowded];
  return m;
}

std::string shared_machines(const Machines& machines, int nodes) {
  if (machines.count == 0 || machines.count >= nodes) return "";
  return std::to_string(nodes) + " nodes on " + std::to_string(machines.count) +
         (machines.count > 1 ? " machines, " : " machine, ") + std::to_string(machines.ranks) + " ranks on " +
         (machines.count > 1 ? "the most crowded one's " : "its ") + std::to_string(machines.cpus) + " CPU(s)";
}

Calibration calibrate(const World& world, int compute_threads) {
  Calibration c;
  c.date = utc_date();
  for (const std::string& name : world.node_names()) c.hosts += (c.hosts.empty() ? "" : ",") + name;
  c.nodes = world.nodes();
  c.ranks_per_node = world.local_size();
  c.machines = machines_of(world);
  c.network.intra_ranks = world.local_size();
  if (world.nodes() > 1) {
    // The first rank of node 0 and of node 1 (ranks are grouped node by node).
    int b = 0;
    while (b < world.size() && world.rank_nodes()[b] == world.rank_nodes()[0]) ++b;
    // The message curve's sizes: 8 bytes (the latency), both sides of the eager limit, and up
    // to 16 MiB (the bandwidth).
    const std::vector<int64_t> sizes = {8, 4 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10,
                                        512 << 10, 1 << 20, 4 << 20, 16 << 20};
    std::vector<double> seconds;
    for (int64_t bytes : sizes)
      seconds.push_back(one_way_seconds(world, 0, b, bytes, bytes <= 8 ? 50 : bytes >= (4 << 20) ? 5 : 10));
    MPI_Bcast(seconds.data(), static_cast<int>(seconds.size()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    c.network.latency_s = seconds.front();
    // 16 MiB crosses by rendezvous (above MPI's eager limit): a round trip before the data.
    c.network.link_bytes_per_s =
        static_cast<double>(sizes.back()) / std::max(1e-9, seconds.back() - 3 * c.network.latency_s);
    std::vector<std::pair<double, double>> points;
    for (std::size_t i = 0; i < sizes.size(); ++i) points.emplace_back(static_cast<double>(sizes[i]), seconds[i]);
    c.network.mpi_message = c.network.measured_here(Curve(std::move(points)));
    c.network.socket_step = c.network.measured_here(Curve(socket_step_curve(world)));
    c.network.ring_step = c.network.measured_here(Curve(mpi_step_curve(world, AllreduceKind::kRing)));
    c.network.flat_step = c.network.measured_here(Curve(mpi_step_curve(world, AllreduceKind::kFlat)));
    c.link_measured = true;
  }
  if (world.local_size() > 1) {
    c.network.intra = Curve(intra_curve(world, c.network));
    c.intra_measured = true;
  }
  if (world.size() > 1) measure_shared_core(world, compute_threads, c.network);
  double rate = world.rank() == 0 ? convert_rate() : 0.0;
  MPI_Bcast(&rate, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  c.network.convert_bytes_per_s = rate;
  c.convert_measured = true;
  return c;
}

}  // namespace sdp::plan
