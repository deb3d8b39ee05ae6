#include "config/sagemaker_env.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "config/json_file.hpp"
#include "core/error.hpp"

extern char** environ;

namespace sdp {

int ResourceConfig::host_index() const {
  auto it = std::find(hosts.begin(), hosts.end(), current_host);
  return it == hosts.end() ? -1 : static_cast<int>(it - hosts.begin());
}

namespace {

void validate_hosts(const ResourceConfig& rc) {
  if (rc.hosts.empty()) throw InputError(rc.source + ": key 'hosts' is empty; list at least one host");
  std::set<std::string> seen;
  for (const auto& h : rc.hosts) {
    if (h.empty()) throw InputError(rc.source + ": key 'hosts' contains an empty host name");
    if (!seen.insert(h).second)
      throw InputError(rc.source + ": key 'hosts' lists '" + h + "' more than once");
  }
  if (rc.current_host.empty()) throw InputError(rc.source + ": key 'current_host' is empty");
  if (rc.host_index() < 0) {
    std::string list;
    for (const auto& h : rc.hosts) list += (list.empty() ? "" : ", ") + h;
    throw InputError(rc.source + ": key 'current_host' is '" + rc.current_host +
                     "', which is not in 'hosts' [" + list + "]");
  }
}

}  // namespace

ResourceConfig load_resource_config(const std::string& path) {
  const nlohmann::json doc = read_json_file(path, "resource config");
  if (!doc.is_object()) throw InputError(path + ": expected a JSON object with current_host and hosts");

  ResourceConfig rc;
  rc.source = path;
  auto it = doc.find("current_host");
  if (it == doc.end()) throw InputError(path + ": key 'current_host' is missing");
  if (!it->is_string()) throw InputError(path + ": key 'current_host' must be a string");
  rc.current_host = it->get<std::string>();

  it = doc.find("hosts");
  if (it == doc.end()) throw InputError(path + ": key 'hosts' is missing");
  if (!it->is_array()) throw InputError(path + ": key 'hosts' must be a list of host names");
  for (const auto& h : *it) {
    if (!h.is_string()) throw InputError(path + ": key 'hosts' must contain only strings");
    rc.hosts.push_back(h.get<std::string>());
  }
  it = doc.find("network_interface_name");
  if (it != doc.end()) {
    if (!it->is_string()) throw InputError(path + ": key 'network_interface_name' must be a string");
    rc.network_interface_name = it->get<std::string>();
  }
  validate_hosts(rc);
  return rc;
}

std::optional<ResourceConfig> resource_config_from_env() {
  const char* hosts = std::getenv("SM_HOSTS");
  const char* current = std::getenv("SM_CURRENT_HOST");
  if (hosts == nullptr || current == nullptr) return std::nullopt;
  ResourceConfig rc;
  rc.source = "SM_HOSTS/SM_CURRENT_HOST";
  rc.current_host = current;
  try {
    auto doc = nlohmann::json::parse(hosts);
    for (const auto& h : doc) rc.hosts.push_back(h.get<std::string>());
  } catch (const nlohmann::json::exception&) {
    throw InputError("environment variable SM_HOSTS must be a JSON list of host names, got '" +
                     std::string(hosts) + "'");
  }
  if (const char* nic = std::getenv("SM_NETWORK_INTERFACE_NAME")) rc.network_interface_name = nic;
  validate_hosts(rc);
  return rc;
}

SageMakerVariables read_sagemaker_variables() {
  SageMakerVariables vars;
  constexpr const char* kChannelPrefix = "SM_CHANNEL_";
  for (char** env = environ; *env != nullptr; ++env) {
    std::string entry = *env;
    if (entry.rfind(kChannelPrefix, 0) != 0) continue;
    auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    vars.channels.emplace_back(entry.substr(std::strlen(kChannelPrefix), eq - std::strlen(kChannelPrefix)),
                               entry.substr(eq + 1));
  }
  std::sort(vars.channels.begin(), vars.channels.end());
  auto get = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  vars.model_dir = get("SM_MODEL_DIR");
  vars.output_data_dir = get("SM_OUTPUT_DATA_DIR");
  vars.checkpoint_dir = get("SM_CHECKPOINT_DIR");
  if (std::string gpus = get("SM_NUM_GPUS"); !gpus.empty()) vars.num_gpus = std::atoi(gpus.c_str());
  return vars;
}

std::optional<ChannelConfig> channel_config(const std::string& data_path, const std::string& config_path) {
  nlohmann::json config;
  std::string source;
  if (const char* env = std::getenv("SM_INPUT_DATA_CONFIG"); env != nullptr && *env != '\0') {
    source = "SM_INPUT_DATA_CONFIG";
    config = nlohmann::json::parse(env, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded()) throw InputError("SM_INPUT_DATA_CONFIG: not valid JSON");
  } else {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(config_path, ec)) return std::nullopt;
    source = config_path;
    config = read_json_file(config_path, "SageMaker inputdataconfig.json");
  }
  if (!config.is_object()) throw InputError(source + ": expected a JSON object of channels");
  std::string name = std::filesystem::path(data_path).lexically_normal().filename().string();
  if (name.empty()) name = std::filesystem::path(data_path).lexically_normal().parent_path().filename().string();
  const auto found = config.find(name);
  if (found == config.end()) return std::nullopt;
  if (!found->is_object()) throw InputError(source + ": key '" + name + "': expected an object");
  ChannelConfig channel;
  auto text = [&](const char* key, std::string& out) {
    const auto value = found->find(key);
    if (value == found->end()) return;
    if (!value->is_string()) throw InputError(source + ": key '" + name + "." + key + "': expected a string");
    out = value->get<std::string>();
  };
  text("TrainingInputMode", channel.input_mode);
  text("S3DistributionType", channel.distribution);
  return channel;
}

SageMakerOutputs find_sagemaker_outputs(const std::string& resource_config_file) {
  namespace fs = std::filesystem;
  SageMakerOutputs outputs;
  const char* dir = std::getenv("SM_OUTPUT_DIR");
  if (dir != nullptr && *dir != '\0') {
    outputs.dir = dir;
  } else if (!resource_config_file.empty()) {
    std::error_code ec;
    const fs::path file = fs::absolute(resource_config_file, ec).lexically_normal();
    const fs::path config = file.parent_path(), input = config.parent_path();
    if (!ec && file.filename() == "resourceconfig.json" && config.filename() == "config" && input.filename() == "input")
      outputs.dir = (input.parent_path() / "output").string();
  }
  if (outputs.dir.empty()) return outputs;
  const char* data = std::getenv("SM_OUTPUT_DATA_DIR");
  outputs.data_dir = data != nullptr && *data != '\0' ? std::string(data) : outputs.dir + "/data";
  return outputs;
}

void resolve_output_locations(JobSpec& spec, const SageMakerOutputs& outputs) {
  if (!outputs.on_sagemaker()) return;
  OutputSpec& out = spec.output;
  if (out.tensorboard == "auto") out.tensorboard = outputs.tensorboard_dir();
  for (std::string* path : {&out.metrics, &out.timeline, &out.tensorboard})
    if (!path->empty() && std::filesystem::path(*path).is_relative())
      *path = (std::filesystem::path(outputs.data_dir) / *path).lexically_normal().string();
}

}  // namespace sdp
