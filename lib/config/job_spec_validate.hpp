// Range and consistency checks of a finished JobSpec, all in one place (docs/job-spec.md).
#pragma once

#include <map>
#include <string>

#include "config/job_spec.hpp"

namespace sdp {

// Throws InputError "<source>: key '<path>': <what is wrong>" for the first bad value;
// `sources` maps key paths to where their value came from ("job.yaml:12", "--set", "default").
void validate_job_spec(const JobSpec& spec, const std::map<std::string, std::string>& sources);

}  // namespace sdp
