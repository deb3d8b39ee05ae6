#include "plan/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "distributed/allreduce.hpp"

namespace sdp::plan {

Curve::Curve(std::vector<std::pair<double, double>> points) : points_(std::move(points)) {
  std::sort(points_.begin(), points_.end());
}

double Curve::at(double bytes) const {
  if (points_.empty()) throw std::logic_error("Curve::at on an empty curve");
  if (bytes <= points_.front().first) return points_.front().second;  // latency-bound
  if (points_.size() == 1) return points_.front().second * bytes / points_.front().first;  // its bandwidth
  for (std::size_t i = 1; i < points_.size(); ++i) {
    const auto& [b0, t0] = points_[i - 1];
    const auto& [b1, t1] = points_[i];
    if (bytes <= b1 || i + 1 == points_.size()) {
      const double slope = (t1 - t0) / (b1 - b0);  // seconds per byte of this segment
      return std::max(0.0, t0 + slope * (bytes - b0));
    }
  }
  return points_.back().second;
}

double intra_node_seconds(double bytes, int ranks_per_node, const Network& network) {
  if (ranks_per_node <= 1 || bytes <= 0) return 0;
  if (!network.intra.empty() && network.intra_ranks == ranks_per_node) return network.intra.at(bytes);
  const double r = ranks_per_node;
  return 2 * (r - 1) / r * bytes / network.intra_bytes_per_s;
}

AllreduceKind resolve_auto(double bytes, const Topology& topology, bool host_gradients) {
  if (topology.nodes > 1 && bytes < static_cast<double>(kAutoFlatBelowBytes)) return AllreduceKind::kFlat;
  if (topology.ranks_per_node > 1 || host_gradients) return AllreduceKind::kHierarchical;
  return AllreduceKind::kFlat;
}

double allreduce_seconds(AllreduceKind algorithm, Compression compression, double bytes, const Topology& topology,
                         const Network& network) {
  if (topology.ranks() <= 1 || bytes <= 0) return 0;
  if (topology.nodes <= 1) return intra_node_seconds(bytes, topology.ranks_per_node, network);
  if (algorithm == AllreduceKind::kAuto) algorithm = resolve_auto(bytes, topology, network.host_gradients);
  const bool compressed = compression == Compression::kFp16 || compression == Compression::kBf16;
  const double wire = compressed ? bytes / 2 : bytes;
  const double casts = compressed ? 2 * bytes / network.convert_bytes_per_s : 0.0;
  const double a = network.latency_s, link = network.link_bytes_per_s;
  const double n = topology.ranks(), nodes = topology.nodes;
  // One message of m bytes across nodes: its latency, a rendezvous round trip above MPI's
  // eager limit (host jobs), and its bytes.
  const auto message = [&](double m) {
    const bool rendezvous = network.rendezvous_above_bytes > 0 && m > network.rendezvous_above_bytes;
    return a * (rendezvous ? 3 : 1);
  };
  const double ring = 2 * (n - 1) * (message(wire / n) + wire / (n * link));
  switch (algorithm) {
    case AllreduceKind::kRing:
      return ring + casts;
    case AllreduceKind::kFlat: {
      // Recursive doubling pairs ranks 1, 2, 4, ... apart: with the ranks of a node numbered
      // together, the first log2(r) exchanges stay inside the node; in each later one all r
      // ranks of a node send their whole buffer over the node's one link at once.
      const double r = topology.ranks_per_node;
      const double intra_steps = std::ceil(std::log2(r)), inter_steps = std::ceil(std::log2(n)) - intra_steps;
      const double doubling =
          intra_steps * wire / network.intra_bytes_per_s + inter_steps * (message(wire) + r * wire / link);
      // Host jobs: MPI_Allreduce, which takes the ring from kMpiAllreduceRingFromBytes on;
      // GPU jobs (NCCL): the cheaper of the two.
      if (network.rendezvous_above_bytes > 0) return (wire < kMpiAllreduceRingFromBytes ? doubling : ring) + casts;
      return std::min(ring, doubling) + casts;
    }
    case AllreduceKind::kHierarchical:
    case AllreduceKind::kAuto:
      // The node phase stays f32 in shared memory; only the inter-node phase is compressed.
      return intra_node_seconds(bytes, topology.ranks_per_node, network) + 2 * (nodes - 1) * a +
             2 * (nodes - 1) / nodes * wire / link + casts;
  }
  return ring;
}

bool communication_overlaps_backward(bool gpu, int compute_threads, int rank_cpus) {
  return gpu || rank_cpus > compute_threads;
}

StepPrediction predict_step(const ComputeProfile& compute, double bucket_mb,
                            const std::function<double(double bytes)>& bucket_seconds, double fixed_s,
                            bool overlap) {
  StepPrediction out;
  out.fixed_s = fixed_s;
  const std::vector<GradientBucket> buckets =
      plan_buckets(compute.arena_elements, compute.element_size, compute.params, bucket_mb);
  out.buckets = static_cast<int>(buckets.size());
  double comm_end = 0;
  for (const GradientBucket& bucket : buckets) {
    double ready = overlap ? 0 : compute.backward_s;
    for (int i = bucket.first_param; i <= bucket.last_param; ++i)
      ready = std::max(ready, compute.ready_s.at(static_cast<std::size_t>(i)));
    const double seconds = bucket_seconds(static_cast<double>(bucket.count * compute.element_size));
    out.comm_s += seconds;
    comm_end = std::max(comm_end, ready) + seconds;
  }
  out.exposed_s = std::max(0.0, comm_end - compute.backward_s);
  out.step_s = compute.forward_s + compute.backward_s + out.exposed_s + compute.optimizer_s + fixed_s;
  return out;
}

}  // namespace sdp::plan
