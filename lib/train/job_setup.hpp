// Setting up a job on every rank: read the job spec from its sources, read the SageMaker
// resource config, build the World and pin a device. Collective: each stage ends with an
// agreement (distributed/agreement.hpp), so a bad input is reported once and every rank exits
// with the same status instead of some ranks waiting forever in the next collective.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "config/sagemaker_env.hpp"
#include "distributed/device_assignment.hpp"
#include "distributed/inter_node.hpp"
#include "distributed/world.hpp"

namespace sdp {

struct JobSources {
  std::string config_path;             // "" = defaults only
  std::string resource_config_path;    // "" = /opt/ml/input/config/resourceconfig.json if present
  std::string hyperparameters_path;    // "" = /opt/ml/input/config/hyperparameters.json if present
  std::vector<std::string> overrides;  // --set key.path=value, in order
};

struct JobSetup {
  JobSpec spec;  // its output locations resolved for where the job runs (resolve_output_locations)
  std::optional<ResourceConfig> resource_config;
  SageMakerOutputs sagemaker_outputs;  // all "" off SageMaker
  std::string hyperparameters_path;    // the file applied, "" if none
  std::unique_ptr<World> world;
  DeviceAssignment device;
  // What NCCL would use across nodes on this machine (inter_node.hpp), and distributed.inter_node
  // resolved from it (kNccl or kHost, the same on every rank; the spec keeps what was asked).
  NcclNetwork nccl_network;
  InterNode inter_node = InterNode::kHost;
};

// The resourceconfig.json the job reads: --resource-config, else SageMaker's own when it
// exists, else "" (SM_HOSTS/SM_CURRENT_HOST or none).
std::string resource_config_file(const JobSources& sources);

// The job spec from its sources (YAML, SageMaker hyperparameters, --set), without MPI.
// Throws InputError. `hyperparameters_path` (optional) gets the hyperparameters file applied.
JobSpec load_job_spec(const JobSources& sources, std::string* hyperparameters_path);

// The CPU threads the job asks for (`threads`, else OMP_NUM_THREADS), 0 when it leaves them
// to the default or cannot be read; for the launch-time wait-policy choice, before MPI_Init.
int requested_threads_before_mpi(const JobSources& sources);

// How set_up_job treats the job's devices.
enum class DeviceUse {
  kOpen,   // pin and open each rank's device, as training does
  kNamed,  // a GPU job is planned from a compute file made elsewhere (`plan --compute FILE`):
           // device: cuda (or a 16-bit or TF32 precision under auto) names cuda:local_rank
           // without needing one here, so a CPU-only machine can plan a GPU cluster
};

JobSetup set_up_job(const JobSources& sources, DeviceUse device_use = DeviceUse::kOpen);

// The AllReduce algorithm `auto` resolves to on this world.
std::string resolved_allreduce(const DistributedSpec& distributed, const World& world);

// Under Slurm (SLURM_JOB_ID set): "job 17 step 0 on sdp-h[1-2], 1 CPU(s) per task", for the
// plan; "" elsewhere.
std::string describe_slurm_allocation();

// The plan printed by `validate` and at the start of training. Collective (it gathers every
// rank's device); the returned text is complete on rank 0 only.
std::string describe_plan(const JobSetup& setup);

// World, topology and devices as JSON (`sdp-train env`). Collective; complete on rank 0.
nlohmann::json describe_environment(const JobSetup& setup);

}  // namespace sdp
