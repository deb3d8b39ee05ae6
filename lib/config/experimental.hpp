// Key values that select a GPU path written and tested on the CPU but not yet run on a GPU.
// `auto` never picks them; `sdp-train validate` and the training log name the ones a job
// sets. docs/job-spec.md's "Experimental keys" lists the same (a test compares the two); a
// value leaves this list when a GPU run has passed its tests (issue: GPU work).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/job_spec.hpp"

namespace sdp {

struct ExperimentalValue {
  std::string_view key;        // "model.batchnorm"
  std::string_view value;      // "folded"
  std::string_view unchecked;  // what no GPU run has checked yet
};

const std::vector<ExperimentalValue>& experimental_values();

// The experimental values `spec` sets, in the list's order.
std::vector<ExperimentalValue> experimental_values_used(const JobSpec& spec);

// One line for the plan: "model.batchnorm=folded (the folded BatchNorm passes), ...; not yet
// run on a GPU (docs/job-spec.md#experimental-keys)"; "" when the job uses none.
std::string describe_experimental_values(const JobSpec& spec);

}  // namespace sdp
