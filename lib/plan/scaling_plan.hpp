// `sdp-train plan`: the predicted step, throughput, scaling, best AllReduce algorithm and
// bucket size, and time and cost of a job, for each node count (docs/guides/plan.md). Pure: the
// compute profile and the network come in measured or assumed; this file only combines them
// with the cost model (cost_model.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/cost_model.hpp"

namespace sdp::plan {

// A setting other than the job's is recommended only when predicted this much faster (2 %:
// docs/records/plan-record.md measured a 0.1 % predicted gain as a 5 % loss).
constexpr double kMinimumGain = 0.02;

struct PlanSetup {
  std::vector<int> nodes = {1, 2, 4, 8};
  int ranks_per_node = 1;
  std::vector<double> bucket_mb = {1, 5, 10, 25, 50, 100, 0};  // candidates; 0 = one bucket
  std::vector<AllreduceKind> algorithms = {AllreduceKind::kFlat, AllreduceKind::kRing, AllreduceKind::kHierarchical};
  Compression compression = Compression::kNone;  // the job's, resolved
  AllreduceKind job_algorithm = AllreduceKind::kAuto;
  double job_bucket_mb = 25;
  // How communication runs beside backward (which_overlap).
  Overlap overlap = Overlap::kOwnCore;
  int64_t samples_per_epoch = 0;
  int64_t epochs = 1;
  std::string instance;          // empty: none named
  double usd_per_node_hour = 0;  // 0: no cost columns
  // Where each input came from, for the header: e.g. "compute: measured on this machine".
  std::vector<std::string> measured, assumed;
};

struct AlgorithmChoice {
  AllreduceKind algorithm = AllreduceKind::kAuto;
  double bucket_mb = 25;
  StepPrediction step;
};

struct PlanRow {
  Topology topology;
  AlgorithmChoice best;
  AlgorithmChoice job;  // the job's own distributed.allreduce and bucket_mb
  std::vector<AlgorithmChoice> per_algorithm;  // each algorithm at its best bucket size
  double images_per_s = 0;
  double efficiency = 1;  // images/s per rank against the smallest node count's
  double epoch_s = 0, job_s = 0, usd_per_epoch = 0, usd_per_job = 0;
};

struct Plan {
  ComputeProfile compute;
  Network network;
  PlanSetup setup;
  std::vector<PlanRow> rows;
};

// InputError when a node count is below 1 or the setup has no algorithm or bucket size.
Plan make_plan(const ComputeProfile& compute, const Network& network, const PlanSetup& setup);

std::string format_plan(const Plan& plan);
std::string plan_to_json(const Plan& plan);

}  // namespace sdp::plan
