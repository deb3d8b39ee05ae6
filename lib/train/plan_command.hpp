// `sdp-train plan --config JOB --nodes 1,2,4,... [...]`: the job's speed, scaling and cost on
// N nodes before they are rented (docs/guides/plan.md). Gathers the inputs of plan/scaling_plan.hpp:
//   compute   measured here (`bench layers`' step, on every rank of this launch at once, the
//             slowest rank's timeline) or read from a file `--save-compute` wrote elsewhere;
//   network   a calibration file (`plan --calibrate FILE` under the cluster's launcher), an
//             instance type of configs/plan/instances.yaml, or --link-gbps/--link-latency-us;
//   the job   its model, batch, precision (compression), allreduce, bucket_mb, epochs and
//             data set size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/job_setup.hpp"

namespace sdp {

struct PlanCommandOptions {
  std::string nodes = "1,2,4,8";
  int gpus_per_node = 0;     // 0: the instance's GPUs, else the calibration's, else this launch's
  std::string instance;      // a name in the instance table
  std::string instances_file;  // "": $SDP_INSTANCES, else configs/plan/instances.yaml beside the binary's tree
  double link_gbps = 0;      // > 0: this link instead of the calibration's or the instance's
  double link_latency_us = -1;
  std::string compute = "measured";  // measured | FILE
  std::string save_compute;  // write the measured compute profile here
  std::string calibration;   // read this calibration file
  std::string calibrate;     // measure this cluster and write the calibration here (no plan)
  std::string buckets;     // "": PlanSetup's candidates (1,5,10,25,50,100,0 MB)
  std::string algorithms;  // "": PlanSetup's (flat,ring,hierarchical)
  int64_t samples_per_epoch = 0;  // 0: the job's training set
  int64_t steps = 10, warmup = 3;  // of the measured step
  bool json = false;
};

// What a job with distributed.calibration takes at start for allreduce: auto and
// bucket_mb: auto (docs/guides/plan.md, "Let the job choose at start").
struct StartupAllreduce {
  AllreduceKind algorithm = AllreduceKind::kAuto;
  double bucket_mb = 25;
  std::string reason;  // for the log's "plan:" line
};
// Collective over the world (every rank gets rank 0's choice). Nothing to choose (one rank,
// or neither key auto): the keys as they are, bucket_mb auto as 25. `input_shape`: the
// model's input (the step is measured on synthetic data of that shape, never the job's
// data, which Pipe mode can read only once). Throws InputError for an unreadable calibration.
StartupAllreduce choose_allreduce_at_start(const JobSpec& spec, const World& world, const DeviceAssignment& device,
                                           const std::vector<int64_t>& input_shape);

// Collective over the launch's world; rank 0's text (table or JSON) is returned on rank 0,
// "" elsewhere. Throws InputError naming the option at fault.
std::string run_plan_command(const JobSetup& setup, const PlanCommandOptions& options);

}  // namespace sdp
