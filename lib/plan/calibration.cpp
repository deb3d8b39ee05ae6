#include "plan/calibration.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/clock.hpp"
#include "core/dtype.hpp"
#include "distributed/allreduce_bench.hpp"
#include "distributed/reduce_kernels.hpp"
#include "distributed/world.hpp"

namespace sdp::plan {

namespace {

using Clock = std::chrono::steady_clock;

// Median one-way time of `bytes` between world ranks a and b (others return 0).
double one_way_seconds(const World& world, int a, int b, int64_t bytes, int iters) {
  std::vector<char> buffer(static_cast<std::size_t>(bytes));
  std::vector<double> samples;
  const int me = world.rank();
  if (me != a && me != b) return 0;
  const int peer = me == a ? b : a;
  for (int i = 0; i < iters + 1; ++i) {
    const auto start = Clock::now();
    if (me == a) {
      MPI_Send(buffer.data(), static_cast<int>(bytes), MPI_CHAR, peer, 7, MPI_COMM_WORLD);
      MPI_Recv(buffer.data(), static_cast<int>(bytes), MPI_CHAR, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buffer.data(), static_cast<int>(bytes), MPI_CHAR, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buffer.data(), static_cast<int>(bytes), MPI_CHAR, peer, 7, MPI_COMM_WORLD);
    }
    if (i > 0) samples.push_back(seconds_since(start) / 2);  // the first warms the connection
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
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
  for (const AllreduceBenchRow& row : result.rows) {
    double seconds = row.time_us * 1e-6;
    if (world.nodes() > 1)
      seconds -= 2 * (nodes - 1) * link.latency_s + 2 * (nodes - 1) / nodes * row.bytes / link.link_bytes_per_s;
    points.emplace_back(static_cast<double>(row.bytes), std::max(seconds, 0.0));
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
  std::sort(samples.begin(), samples.end());
  return static_cast<double>(count * 4) / samples[samples.size() / 2];
}

}  // namespace

Calibration calibrate(const World& world) {
  Calibration c;
  c.date = utc_date();
  for (const std::string& name : world.node_names()) c.hosts += (c.hosts.empty() ? "" : ",") + name;
  c.nodes = world.nodes();
  c.ranks_per_node = world.local_size();
  c.network.intra_ranks = world.local_size();
  if (world.nodes() > 1) {
    // The first rank of node 0 and of node 1 (ranks are grouped node by node).
    int b = 0;
    while (b < world.size() && world.rank_nodes()[b] == world.rank_nodes()[0]) ++b;
    const double latency = one_way_seconds(world, 0, b, 8, 50);
    const int64_t big = 16 << 20;
    const double bulk = one_way_seconds(world, 0, b, big, 5);
    double figures[2] = {latency, bulk};
    MPI_Bcast(figures, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    c.network.latency_s = figures[0];
    // 16 MiB crosses by rendezvous (above MPI's eager limit): a round trip before the data.
    c.network.link_bytes_per_s = static_cast<double>(big) / std::max(1e-9, figures[1] - 3 * figures[0]);
    c.link_measured = true;
  }
  if (world.local_size() > 1) {
    c.network.intra = Curve(intra_curve(world, c.network));
    c.intra_measured = true;
  }
  double rate = world.rank() == 0 ? convert_rate() : 0.0;
  MPI_Bcast(&rate, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  c.network.convert_bytes_per_s = rate;
  c.convert_measured = true;
  return c;
}

}  // namespace sdp::plan
