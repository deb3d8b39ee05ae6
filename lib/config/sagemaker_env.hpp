// The SageMaker training environment: /opt/ml/input/config/resourceconfig.json (which host
// am I, which hosts take part, which network interface to use) and the SM_* variables the
// SageMaker training toolkit sets. Off SageMaker none of this exists and nothing is required.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/job_spec.hpp"

namespace sdp {

inline constexpr const char* kDefaultResourceConfigPath = "/opt/ml/input/config/resourceconfig.json";
inline constexpr const char* kDefaultHyperparametersPath = "/opt/ml/input/config/hyperparameters.json";
inline constexpr const char* kDefaultInputDataConfigPath = "/opt/ml/input/config/inputdataconfig.json";

struct ResourceConfig {
  std::string source;  // file the config came from (or "SM_HOSTS/SM_CURRENT_HOST")
  std::string current_host;
  std::vector<std::string> hosts;
  std::string network_interface_name;  // may be empty

  int host_index() const;  // index of current_host in hosts
};

// Parses and validates a resourceconfig.json: current_host and hosts present and of the
// right types, hosts non-empty and unique, current_host among them. Extra fields
// (instance_groups, current_group_name, ...) are tolerated. Throws InputError.
ResourceConfig load_resource_config(const std::string& path);

// Built from SM_HOSTS (a JSON list) and SM_CURRENT_HOST when both are set, else nullopt.
std::optional<ResourceConfig> resource_config_from_env();

// The SM_* variables present in the environment, for `sdp-train env`.
struct SageMakerVariables {
  std::vector<std::pair<std::string, std::string>> channels;  // SM_CHANNEL_<NAME> -> path
  std::string model_dir, output_data_dir, checkpoint_dir;
  int num_gpus = -1;  // SM_NUM_GPUS, -1 when unset
};
SageMakerVariables read_sagemaker_variables();

// A channel as inputdataconfig.json describes it.
struct ChannelConfig {
  std::string input_mode = "File";                // TrainingInputMode: File, FastFile or Pipe
  std::string distribution = "FullyReplicated";  // S3DistributionType: or ShardedByS3Key
};
// The channel that `data_path` names (its last path component, as SageMaker mounts channel
// <name> at /opt/ml/input/data/<name>) in the SageMaker toolkit's SM_INPUT_DATA_CONFIG (JSON)
// or, without it, in `config_path` when that file exists; nullopt off SageMaker or for a path
// that is no channel. Throws InputError for a config that is not a JSON object of objects.
std::optional<ChannelConfig> channel_config(const std::string& data_path,
                                            const std::string& config_path = kDefaultInputDataConfigPath);

// SageMaker's output directories for this job (/opt/ml/output), all "" off SageMaker.
struct SageMakerOutputs {
  std::string dir;       // /opt/ml/output
  std::string data_dir;  // /opt/ml/output/data: uploaded as output.tar.gz when the job ends
  bool on_sagemaker() const { return !dir.empty(); }
  // Its text is the job's FailureReason.
  std::string failure_file() const { return dir.empty() ? "" : dir + "/failure"; }
  // Synced to S3 while the job runs when the estimator sets a TensorBoardOutputConfig.
  std::string tensorboard_dir() const { return dir.empty() ? "" : dir + "/tensorboard"; }
};

// Where they are: SM_OUTPUT_DIR and SM_OUTPUT_DATA_DIR when set (SageMaker's training toolkit
// and scripts/sagemaker-entrypoint.sh set them); else, when `resource_config_file` (the
// resourceconfig.json the job reads, "" for none) lies at <root>/input/config/resourceconfig.json
// as SageMaker puts it (under /opt/ml, or a tree a test fakes), <root>/output and
// <root>/output/data. Neither: not on SageMaker.
SageMakerOutputs find_sagemaker_outputs(const std::string& resource_config_file);

// The output locations of `spec` for where it runs. On SageMaker, relative paths of
// output.metrics, output.timeline and output.tensorboard are taken under outputs.data_dir (a
// relative path would land in the container's working directory, which is lost with it), and
// output.tensorboard: auto becomes outputs.tensorboard_dir(). Elsewhere nothing changes (auto
// stays, as other auto keys do, and means none: tensorboard_directory).
void resolve_output_locations(JobSpec& spec, const SageMakerOutputs& outputs);

// The directory TensorBoard's event files go to, "" for none (output.tensorboard "" or an
// auto left off SageMaker).
inline std::string tensorboard_directory(const OutputSpec& output) {
  return output.tensorboard == "auto" ? "" : output.tensorboard;
}

}  // namespace sdp
