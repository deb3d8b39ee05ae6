// The global batch of a job and the learning rate that follows from it, in one place for the
// LR schedule, the plan, the [start] line and checkpoints (resume re-derives by the same rule):
//
//   global batch = data.batch_size x world size x train.accumulate_steps
//   reference    = optimizer.reference_batch, or data.batch_size when unset (0)
//   peak LR      = optimizer.lr x lr_scaling(global batch / reference)
//                  (linear: x ratio, sqrt: x sqrt(ratio), none: x 1, factor f: x f)
//
// With reference_batch set, optimizer.lr is the LR for that global batch (Goyal et al. 2017:
// lr 0.1 @ 256, linear). Unset, optimizer.lr is the LR of one rank with one micro-batch, so it
// scales with world size x accumulate_steps: exactly what it did before accumulation existed
// (by world size), and 2 ranks x 4 micro-batches get the LR of 8 ranks x 1, as they should.
#pragma once

#include <cstdint>
#include <string>

#include "config/job_spec.hpp"

namespace sdp {

struct GlobalBatch {
  int64_t per_rank = 1;  // data.batch_size: one micro-batch of one rank
  int ranks = 1;
  int accumulate = 1;  // train.accumulate_steps: micro-batches per optimizer step
  int64_t size() const { return per_rank * ranks * accumulate; }
  std::string str() const;  // "512 (64 x 8 ranks x 1)"
};

GlobalBatch global_batch(const JobSpec& spec, int world_size);
// The global batch optimizer.lr is stated for.
int64_t reference_batch(const JobSpec& spec);
// The LR after scaling (the end of warm-up, the start of the decay).
double peak_lr(const JobSpec& spec, int world_size);
// For the plan: "global batch 512 (64 x 8 ranks x 1), lr 0.05 @ 256 -> 0.1 (linear)".
std::string describe_lr_rule(const JobSpec& spec, int world_size);

}  // namespace sdp
