// The final model, written by rank 0 to output.model_dir/model.safetensors: parameters and
// BatchNorm buffers under their layer names (PyTorch-loadable), with the job spec, step,
// epoch, world size and test accuracy in the metadata.
#pragma once

#include <cstdint>
#include <string>

#include "config/job_spec.hpp"
#include "distributed/world.hpp"
#include "nn/model.hpp"
#include "train/trainer.hpp"

namespace sdp {

// Call on rank 0 only.
void save_model(const nn::Model& model, const JobSpec& spec, const World& world, const TrainResult& result,
                int64_t epoch);

// True when `path` is a final model save_model wrote for `spec`'s model at `step` (false when it
// is absent, unreadable or another).
bool is_final_model_of(const std::string& path, const JobSpec& spec, int64_t step);

}  // namespace sdp
