#include "plan/scaling_plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.hpp"
#include "distributed/allreduce.hpp"

namespace sdp::plan {

namespace {

// The loss and the stop flag: a host job without wire compression carries them in its last
// bucket (DataParallel's step_agreement_in_last_bucket), free; otherwise one small AllReduce per
// step (flat: latency-bound).
bool agreement_in_last_bucket(const Network& network, Compression compression) {
  return network.host_gradients && compression == Compression::kNone;
}

AlgorithmChoice predict(const ComputeProfile& compute, const Network& network, const Topology& topology,
                        AllreduceKind algorithm, Compression compression, double bucket_mb, Overlap overlap) {
  const double fixed = agreement_in_last_bucket(network, compression)
                           ? 0.0
                           : allreduce_seconds(AllreduceKind::kFlat, Compression::kNone, 16, topology, network);
  AlgorithmChoice choice{algorithm, bucket_mb, {}};
  choice.step = predict_step(
      compute, bucket_mb,
      [&](double bytes, bool core_busy) {
        const AllreduceKind ran =
            algorithm == AllreduceKind::kAuto ? resolve_auto(bytes, topology, network.host_gradients) : algorithm;
        return BucketCost{allreduce_seconds(algorithm, compression, bytes, topology,
                                            core_busy ? network.on_busy_cores(ran) : network),
                          network.shared_core.cost(ran)};
      },
      fixed, overlap);
  return choice;
}

std::string bucket_text(double mb) {
  if (mb <= 0) return "one";
  char text[32];
  std::snprintf(text, sizeof text, "%g MB", mb);
  return text;
}

std::string duration_text(double seconds) {
  char text[32];
  if (seconds < 120) std::snprintf(text, sizeof text, "%.1f s", seconds);
  else if (seconds < 7200) std::snprintf(text, sizeof text, "%.1f min", seconds / 60);
  else std::snprintf(text, sizeof text, "%.1f h", seconds / 3600);
  return text;
}

}  // namespace

Plan make_plan(const ComputeProfile& compute, const Network& network, const PlanSetup& setup) {
  if (setup.nodes.empty()) throw InputError("--nodes: give at least one node count");
  for (int n : setup.nodes)
    if (n < 1) throw InputError("--nodes: a node count must be at least 1, got " + std::to_string(n));
  if (setup.ranks_per_node < 1) throw InputError("--gpus-per-node: must be at least 1");
  if (setup.algorithms.empty() || setup.bucket_mb.empty())
    throw InputError("plan: needs at least one algorithm and one bucket size");
  Plan plan{compute, network, setup, {}};
  double base_per_rank = 0;
  for (int nodes : setup.nodes) {
    PlanRow row;
    row.topology = {nodes, setup.ranks_per_node};
    for (AllreduceKind algorithm : setup.algorithms) {
      AlgorithmChoice best_bucket;
      for (double mb : setup.bucket_mb) {
        AlgorithmChoice c =
            predict(compute, network, row.topology, algorithm, setup.compression, mb, setup.overlap);
        if (best_bucket.step.step_s == 0 || c.step.step_s < best_bucket.step.step_s) best_bucket = c;
      }
      row.per_algorithm.push_back(best_bucket);
    }
    // A tie (one node: every algorithm is the measured node phase) goes to what the job runs.
    const AllreduceKind preferred = setup.job_algorithm == AllreduceKind::kAuto
                                        ? resolve_auto(static_cast<double>(kAutoFlatBelowBytes), row.topology,
                                                       network.host_gradients)
                                        : setup.job_algorithm;
    row.best = *std::min_element(row.per_algorithm.begin(), row.per_algorithm.end(), [&](const auto& a, const auto& b) {
      if (a.step.step_s != b.step.step_s) return a.step.step_s < b.step.step_s;
      return a.algorithm == preferred && b.algorithm != preferred;
    });
    row.job = predict(compute, network, row.topology, setup.job_algorithm, setup.compression, setup.job_bucket_mb,
                      setup.overlap);
    // The job's own setting stays unless another beats it by more than kMinimumGain: below
    // that the model's error decides, and a change would buy nothing measurable.
    if (row.job.step.step_s <= row.best.step.step_s * (1 + kMinimumGain)) row.best = row.job;
    const double global_batch = static_cast<double>(compute.batch_per_rank) * row.topology.ranks();
    row.images_per_s = global_batch / row.best.step.step_s;
    const double per_rank = row.images_per_s / row.topology.ranks();
    if (base_per_rank == 0) base_per_rank = per_rank;
    row.efficiency = per_rank / base_per_rank;
    if (setup.samples_per_epoch > 0) {
      const double steps = std::ceil(static_cast<double>(setup.samples_per_epoch) / global_batch);
      row.epoch_s = steps * row.best.step.step_s;
      row.job_s = row.epoch_s * static_cast<double>(setup.epochs);
      row.usd_per_epoch = row.epoch_s / 3600 * setup.usd_per_node_hour * nodes;
      row.usd_per_job = row.usd_per_epoch * static_cast<double>(setup.epochs);
    }
    plan.rows.push_back(std::move(row));
  }
  return plan;
}

std::string format_plan(const Plan& plan) {
  const PlanSetup& s = plan.setup;
  const ComputeProfile& c = plan.compute;
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof line, "# plan: %s, %s, batch %lld per rank, %d rank(s) per node%s%s\n", c.model.c_str(),
                c.precision.c_str(), static_cast<long long>(c.batch_per_rank), s.ranks_per_node,
                s.instance.empty() ? "" : ", instance ", s.instance.c_str());
  out << line;
  std::snprintf(line, sizeof line,
                "# compute per rank: forward %.3f ms, backward %.3f ms, optimizer %.3f ms (%s)\n",
                c.forward_s * 1e3, c.backward_s * 1e3, c.optimizer_s * 1e3, c.measured_on.c_str());
  out << line;
  for (const std::string& m : s.measured) out << "# measured: " << m << "\n";
  for (const std::string& a : s.assumed) out << "# assumed: " << a << "\n";
  out << "# the job's setting: allreduce " << to_string(s.job_algorithm) << ", bucket " << bucket_text(s.job_bucket_mb)
      << ", compression " << to_string(s.compression) << "\n";
  out << "# the step's agreement (loss, stop): "
      << (agreement_in_last_bucket(plan.network, s.compression)
              ? "carried in the last gradient bucket, no collective of its own"
              : "one 16-byte flat AllReduce per step, counted in step_ms")
      << "\n";
  const bool costs = s.samples_per_epoch > 0;
  std::snprintf(line, sizeof line, "%5s %5s %9s %11s %6s %10s %-22s %9s %9s", "nodes", "ranks", "step_ms",
                "images/s", "scale", "exposed_ms", "best", "vs_next", "vs_job");
  out << line;
  if (costs) {
    std::snprintf(line, sizeof line, " %10s %10s %10s %10s", "epoch", "usd/epoch", "job", "usd/job");
    out << line;
  }
  out << "\n";
  for (const PlanRow& row : plan.rows) {
    double next = 0;
    for (const AlgorithmChoice& a : row.per_algorithm)
      if (a.algorithm != row.best.algorithm && (next == 0 || a.step.step_s < next)) next = a.step.step_s;
    const std::string best = to_string(row.best.algorithm) + ", " + bucket_text(row.best.bucket_mb);
    char vs_next[16] = "-";
    if (next > 0) std::snprintf(vs_next, sizeof vs_next, "%.3fx", next / row.best.step.step_s);
    std::snprintf(line, sizeof line, "%5d %5d %9.3f %11.1f %5.1f%% %10.3f %-22s %9s %8.3fx", row.topology.nodes,
                  row.topology.ranks(), row.best.step.step_s * 1e3, row.images_per_s, 100 * row.efficiency,
                  row.best.step.exposed_s * 1e3, best.c_str(), vs_next, row.job.step.step_s / row.best.step.step_s);
    out << line;
    if (costs) {
      const bool priced = s.usd_per_node_hour > 0;
      char usd_epoch[24] = "-", usd_job[24] = "-";
      if (priced) {
        std::snprintf(usd_epoch, sizeof usd_epoch, "%.2f", row.usd_per_epoch);
        std::snprintf(usd_job, sizeof usd_job, "%.2f", row.usd_per_job);
      }
      std::snprintf(line, sizeof line, " %10s %10s %10s %10s", duration_text(row.epoch_s).c_str(), usd_epoch,
                    duration_text(row.job_s).c_str(), usd_job);
      out << line;
    }
    out << "\n";
  }
  out << "# scale: images/s per rank against " << plan.rows.front().topology.nodes
      << " node(s); vs_next: the next best algorithm's step over the best's (below 1: faster by less than 2 %, too "
         "little to change the job's setting); vs_job: the job's setting's step over the best's\n";
  if (costs)
    out << "# epoch: " << s.samples_per_epoch << " samples; job: " << s.epochs << " epoch(s)"
        << (s.usd_per_node_hour > 0 ? "" : "; no price: name an --instance for costs") << "\n";
  out << "# not modelled: contention in a shared fabric, stragglers, the loader (data wait taken as 0), "
         "evaluation and checkpoints\n";
  return out.str();
}

std::string plan_to_json(const Plan& plan) {
  using nlohmann::json;
  auto choice = [](const AlgorithmChoice& a) {
    return json{{"allreduce", to_string(a.algorithm)},   {"bucket_mb", a.bucket_mb},
                {"step_s", a.step.step_s},               {"comm_s", a.step.comm_s},
                {"exposed_s", a.step.exposed_s},         {"buckets", a.step.buckets},
                {"agreement_s", a.step.fixed_s},       {"stolen_s", a.step.stolen_s}};
  };
  json rows = json::array();
  for (const PlanRow& row : plan.rows) {
    json algorithms = json::array();
    for (const AlgorithmChoice& a : row.per_algorithm) algorithms.push_back(choice(a));
    rows.push_back({{"nodes", row.topology.nodes},
                    {"ranks", row.topology.ranks()},
                    {"images_per_s", row.images_per_s},
                    {"scaling_efficiency", row.efficiency},
                    {"best", choice(row.best)},
                    {"job_setting", choice(row.job)},
                    {"algorithms", algorithms},
                    {"epoch_s", row.epoch_s},
                    {"job_s", row.job_s},
                    {"usd_per_epoch", row.usd_per_epoch},
                    {"usd_per_job", row.usd_per_job}});
  }
  const PlanSetup& s = plan.setup;
  json doc{{"model", plan.compute.model},
           {"precision", plan.compute.precision},
           {"batch_per_rank", plan.compute.batch_per_rank},
           {"ranks_per_node", s.ranks_per_node},
           {"instance", s.instance},
           {"compression", to_string(s.compression)},
           {"compute", {{"forward_s", plan.compute.forward_s},
                        {"backward_s", plan.compute.backward_s},
                        {"optimizer_s", plan.compute.optimizer_s},
                        {"measured_on", plan.compute.measured_on}}},
           {"network", {{"link_bytes_per_s", plan.network.link_bytes_per_s},
                        {"latency_s", plan.network.latency_s},
                        {"intra_ranks", plan.network.intra_ranks}}},
           {"overlap", to_string(s.overlap)},
           {"measured", s.measured},
           {"assumed", s.assumed},
           {"rows", rows}};
  return doc.dump(2) + "\n";
}

}  // namespace sdp::plan
