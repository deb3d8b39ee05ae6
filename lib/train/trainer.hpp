// The training loop (DESIGN.md §6-9): loads the data, builds the model, makes every
// rank start from rank 0's weights, then runs synchronous steps (forward, backward,
// gradient mean over ranks, optimizer step) with evaluation after epochs, metric lines on
// rank 0, and the final model written by rank 0 to output.model_dir/model.safetensors.
#pragma once

#include <cstdint>

#include "train/job_setup.hpp"

namespace sdp {

struct TrainResult {
  int64_t steps = 0;
  double train_seconds = 0;   // step loop only (evaluation excluded)
  double images_per_sec = 0;  // global, over the whole run
  double test_loss = 0;
  double test_accuracy = 0;   // fraction in [0, 1]
};

// Collective. Bad data or model options throw CollectiveFailure (reported once);
// a non-finite loss stops every rank at the same step with RuntimeError.
TrainResult train(JobSetup& setup);

}  // namespace sdp
