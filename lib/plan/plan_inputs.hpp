// What `sdp-train plan` reads besides the job (docs/records/plan-record.md, "Inputs"):
//   compute file   one rank's measured step (ComputeProfile) as JSON: `plan --save-compute`
//                  writes it where the step runs (a GPU machine), `plan --compute FILE` reads it
//                  anywhere;
//   calibration    a link's bandwidth and latency and the node's AllReduce curve, measured by
//                  `plan --calibrate` on the cluster;
//   instances      configs/plan/instances.yaml: instance types with their accelerators, network
//                  and on-demand price, dated and sourced, edited by users.
// Every reader throws InputError naming the file and the key at fault (exit status 2).
#pragma once

#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

#include "core/error.hpp"
#include "plan/cost_model.hpp"

namespace sdp::plan {

// Schema version of the compute and calibration files.
constexpr int kPlanFileVersion = 1;

// The JSON file `path` as a plan file of this `kind` ("sdp-train compute profile", ...): its
// "version" is this build's and its "kind" the one asked for, else InputError naming the key.
nlohmann::json read_plan_file(const std::string& path, const std::string& what, const std::string& kind);

// object[key] as a T, or InputError "<path>: key '<prefix><key>' is missing / has the wrong type".
template <class T>
T file_field(const nlohmann::json& object, const std::string& key, const std::string& path,
             const std::string& prefix = "") {
  const std::string where = path + ": key '" + prefix + key + "'";
  if (!object.is_object() || !object.contains(key)) throw InputError(where + " is missing");
  const nlohmann::json& value = object.at(key);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    static_assert(std::is_signed_v<T>, "plan files hold signed integers");
    // json's own conversion of 1e50 or 2^63 to an integer is undefined: checked here.
    if (!value.is_number_integer())
      throw InputError(where + " has the wrong type (" + std::string(value.type_name()) + ", not an integer)");
    if (value.is_number_unsigned() ? value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())
                                   : value.get<int64_t>() < std::numeric_limits<T>::min() ||
                                         value.get<int64_t>() > std::numeric_limits<T>::max())
      throw InputError(where + " is out of range");
    return static_cast<T>(value.get<int64_t>());
  } else {
    try {
      return value.get<T>();
    } catch (const nlohmann::json::exception&) {
      throw InputError(where + " has the wrong type (" + std::string(value.type_name()) + ")");
    }
  }
}

nlohmann::json compute_profile_to_json(const ComputeProfile& profile);
ComputeProfile read_compute_profile(const std::string& path);

// The machines (kernels: core/device_info's machine_id) a launch's ranks ran on, and the most
// crowded one's ranks and CPUs (the union of its ranks' CPU sets). Fewer machines than nodes are
// simulated hosts (network namespaces, distributed.ranks_per_node) sharing those CPUs.
struct Machines {
  int count = 0, ranks = 0, cpus = 0;  // count 0: not recorded (a calibration from before)
};

// A measured link and node, and what was measured rather than assumed.
struct Calibration {
  std::string date, hosts;  // when, and on which nodes (names)
  int nodes = 0, ranks_per_node = 0;
  Machines machines;
  bool link_measured = false, intra_measured = false, convert_measured = false;
  Network network;
};
nlohmann::json calibration_to_json(const Calibration& calibration);
Calibration read_calibration(const std::string& path);

struct InstanceType {
  std::string name, accelerator;
  int accelerators = 0;          // GPUs per node (0: a CPU instance)
  int vcpus = 0;
  double network_gbps = 0;       // the node's network, Gbit/s each way
  bool efa = false;
  double latency_us = 0;         // one message one way through the fabric (assumed)
  double node_busbw_gbs = 0;     // intra-node AllReduce bus bandwidth, GB/s (assumed; NVLink)
  double usd_per_hour = 0;       // on-demand, the table's region
};
struct InstanceTable {
  std::string path, source, date, region;
  double link_efficiency = 0.9;  // share of the line rate a bulk transfer reaches (assumed)
  std::map<std::string, InstanceType> types;
};
InstanceTable read_instance_table(const std::string& path);
// The table's entry, or InputError naming --instance and the known types.
const InstanceType& find_instance(const InstanceTable& table, const std::string& name);

}  // namespace sdp::plan
