// Pre-flight check of the job's output locations (docs/guides/failures.md): before the data is read
// and long before the first step, rank 0 (the only rank that writes) creates output.model_dir,
// checkpoint.dir, output.tensorboard and the parents of output.metrics and output.timeline, and
// proves each writable by writing a probe file. A location that fails is an InputError naming
// its key and path (exit 2, agreed by all ranks), instead of a run lost at its first checkpoint
// or after its last step.
#pragma once

#include "config/job_spec.hpp"
#include "distributed/world.hpp"

namespace sdp {

// Collective.
void check_output_locations(const JobSpec& spec, const World& world);

}  // namespace sdp
