// A JobSpec written back as YAML: the loader's inverse.
#pragma once

#include <string>

#include "config/job_spec.hpp"

namespace sdp {

// The fully resolved spec as YAML, every key included (for `sdp-train validate` and the
// checkpoint metadata). Loading it gives the same spec back.
std::string job_spec_to_yaml(const JobSpec& spec);

}  // namespace sdp
