// A JobSpec written back as YAML: the loader's inverse.
#pragma once

#include <string>
#include <vector>

#include "config/job_spec.hpp"

namespace sdp {

// The fully resolved spec as YAML, every key included (for `sdp-train validate` and the
// checkpoint metadata). Loading it gives the same spec back.
std::string job_spec_to_yaml(const JobSpec& spec);

// One key whose value differs between two job specs written by job_spec_to_yaml.
struct JobSpecDifference {
  std::string key;     // "optimizer.lr"
  std::string before;  // the value as YAML text ("0.1", "[60, 120]", "\"\"" for empty); "" if absent
  std::string after;
};

// Every key of the schema, in document order, whose value differs between `before_yaml` (e.g.
// the job spec a checkpoint holds, perhaps of an older version, which may lack keys) and
// `after_yaml`. Throws InputError when either is not a YAML map.
std::vector<JobSpecDifference> job_spec_differences(const std::string& before_yaml, const std::string& after_yaml);

}  // namespace sdp
