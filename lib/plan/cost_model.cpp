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
  const double link = network.link_bytes_per_s;
  const double n = topology.ranks(), nodes = topology.nodes;
  const double ring = 2 * (n - 1) * network.mpi_step_seconds(AllreduceKind::kRing, wire / n);
  switch (algorithm) {
    case AllreduceKind::kRing:
      return ring + casts;
    case AllreduceKind::kFlat: {
      // Recursive doubling pairs ranks 1, 2, 4, ... apart: with the ranks of a node numbered
      // together, the first log2(r) exchanges stay inside the node; in each later one all r
      // ranks of a node send their whole buffer over the node's one link at once.
      const double r = topology.ranks_per_node;
      const double intra_steps = std::ceil(std::log2(r)), inter_steps = std::ceil(std::log2(n)) - intra_steps;
      const double doubling = intra_steps * wire / network.intra_bytes_per_s +
                              inter_steps * (network.crossing_seconds(wire) + (r - 1) * wire / link);
      // Host jobs: MPI_Allreduce, which takes the ring from kMpiAllreduceRingFromBytes on;
      // GPU jobs (NCCL): the cheaper of the two.
      if (network.rendezvous_above_bytes > 0) {
        if (wire < kMpiAllreduceRingFromBytes) return doubling + casts;
        return 2 * (n - 1) * network.mpi_step_seconds(AllreduceKind::kFlat, wire / n) + casts;
      }
      return std::min(ring, doubling) + casts;
    }
    case AllreduceKind::kHierarchical:
    case AllreduceKind::kAuto:
      // The node phase stays f32 in shared memory; only the inter-node phase is compressed.
      return intra_node_seconds(bytes, topology.ranks_per_node, network) +
             2 * (nodes - 1) * network.socket_step_seconds(wire / nodes) + casts;
  }
  return ring;
}

bool communication_overlaps_backward(bool gpu, int compute_threads, int rank_cpus) {
  return gpu || rank_cpus > compute_threads;
}

Overlap which_overlap(bool gpu, int compute_threads, int rank_cpus, const Network& network) {
  if (communication_overlaps_backward(gpu, compute_threads, rank_cpus)) return Overlap::kOwnCore;
  return network.shared_core.measured ? Overlap::kSharedCore : Overlap::kAfterBackward;
}

const char* to_string(Overlap overlap) {
  switch (overlap) {
    case Overlap::kOwnCore: return "own core";
    case Overlap::kSharedCore: return "shared core";
    case Overlap::kAfterBackward: return "after backward";
  }
  return "?";
}

namespace {

// m bytes by measured times on `network`: the curve plus what this network adds over the one
// it was measured on (on_busy_cores' later messages and slower link), never below the formula:
// a message measured faster than the link's rate allows crossed in a burst the link had saved
// up between measurements (a shaped link's token bucket), which back-to-back steps of an
// AllReduce do not find again.
double measured_or_formula(double formula, const MeasuredTimes& times, double m, const Network& network) {
  if (times.empty()) return formula;
  const double measured = times.curve.at(m) + std::max(0.0, network.latency_s - times.latency_s) +
                          std::max(0.0, m / network.link_bytes_per_s - m / times.bytes_per_s);
  return std::max(formula, measured);
}

}  // namespace

double Network::crossing_seconds(double m) const {
  const bool through_mpi = rendezvous_above_bytes > 0;
  const bool rendezvous = through_mpi && m > rendezvous_above_bytes;
  const double formula = latency_s * (rendezvous ? 3 : 1) + m / link_bytes_per_s;
  if (!through_mpi) return formula;
  return measured_or_formula(formula, mpi_message, m, *this);
}

double Network::socket_step_seconds(double m) const {
  const double formula = latency_s + m / link_bytes_per_s;
  if (rendezvous_above_bytes <= 0) return formula;  // GPU jobs cross through NCCL, not the socket ring
  return measured_or_formula(formula, socket_step, m, *this);
}

double Network::mpi_step_seconds(AllreduceKind kind, double m) const {
  const double message = crossing_seconds(m);
  const MeasuredTimes& steps = kind == AllreduceKind::kFlat ? flat_step : ring_step;
  if (rendezvous_above_bytes <= 0 || steps.empty()) return message;
  // The message is the floor: each measure leaves out what the other holds. The steps, measured
  // back to back, lack a message that follows a quiet link (as a step's first does after
  // compute: with 2 ms a link the job's steps of 124 KB took 15.8 ms, the calibration's 13.5, a
  // message one way 16.4); the message lacks both directions busy at once.
  return measured_or_formula(message, steps, m, *this);
}

double SharedCoreCosts::cost(AllreduceKind ran) const {
  const auto it = s_per_byte.find(ran);
  return it == s_per_byte.end() ? 0.0 : it->second;
}

Network Network::on_busy_cores(AllreduceKind ran) const {
  Network busy = *this;
  busy.latency_s += shared_core.latency_s;
  const auto it = shared_core.link_share.find(ran);
  if (it != shared_core.link_share.end() && it->second > 0) busy.link_bytes_per_s *= std::min(1.0, it->second);
  return busy;
}

StepPrediction predict_step(const ComputeProfile& compute, double bucket_mb, const BucketCosts& bucket_cost,
                            double fixed_s, Overlap overlap) {
  StepPrediction out;
  out.fixed_s = fixed_s;
  const std::vector<GradientBucket> buckets =
      plan_buckets(compute.arena_elements, compute.element_size, compute.params, bucket_mb);
  out.buckets = static_cast<int>(buckets.size());
  std::vector<double> ready(buckets.size(), 0.0), bytes(buckets.size(), 0.0);
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    for (int i = buckets[k].first_param; i <= buckets[k].last_param; ++i)
      ready[k] = std::max(ready[k], compute.ready_s.at(static_cast<std::size_t>(i)));
    bytes[k] = static_cast<double>(buckets[k].count * compute.element_size);
  }
  // On shared cores what the communication takes lengthens backward, and a longer backward
  // hides more of it: a few rounds of that fixed point settle it (the lengthening only grows).
  double backward = compute.backward_s;
  const int rounds = overlap == Overlap::kSharedCore ? 6 : 1;
  for (int round = 0; round < rounds; ++round) {
    const double stretch = backward / compute.backward_s;
    double comm_end = 0, stolen = 0;
    out.comm_s = 0;
    for (std::size_t k = 0; k < buckets.size(); ++k) {
      const double start =
          std::max(comm_end, overlap == Overlap::kAfterBackward ? backward : ready[k] * stretch);
      const bool core_busy = overlap == Overlap::kSharedCore && start < backward;
      const BucketCost cost = bucket_cost(bytes[k], core_busy);
      double seconds = cost.seconds;
      if (core_busy && seconds > 0) {
        // The bucket goes at the busy cores' pace until backward ends, then at the idle
        // cores' pace: a bucket that starts just before the end costs about what an idle one
        // does (busy cores may make each message many times slower, as under a CPU quota).
        const double busy_share = std::min(1.0, (backward - start) / seconds);
        if (busy_share < 1) seconds = (backward - start) + (1 - busy_share) * bucket_cost(bytes[k], false).seconds;
        // Only the share of the bucket that runs before backward's end takes from it.
        stolen += cost.core_s_per_byte * bytes[k] * busy_share;
      }
      out.comm_s += seconds;
      comm_end = start + seconds;
    }
    out.exposed_s = std::max(0.0, comm_end - backward);
    out.stolen_s = backward - compute.backward_s;
    const double next = compute.backward_s + stolen;
    if (std::abs(next - backward) < 1e-9) break;
    if (round + 1 < rounds) backward = next;
  }
  out.step_s = compute.forward_s + backward + out.exposed_s + compute.optimizer_s + fixed_s;
  return out;
}

}  // namespace sdp::plan
