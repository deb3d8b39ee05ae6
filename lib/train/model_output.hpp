// The final model, written by rank 0 to output.model_dir/model.safetensors: parameters and
// BatchNorm buffers under their layer names (PyTorch-loadable), with the job spec, step,
// epoch, world size and test accuracy in the metadata. A model trained on a set that names its
// classes (an image folder) carries them: metadata "class_names" (a JSON list, label order)
// and labels.txt beside the model (line i: the name of label i), as TensorFlow's and
// torchvision's exported classifiers ship them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "distributed/world.hpp"
#include "nn/model.hpp"
#include "train/trainer.hpp"

namespace sdp {

// Call on rank 0 only.
void save_model(const nn::Model& model, const JobSpec& spec, const World& world, const TrainResult& result,
                int64_t epoch, const std::vector<std::string>& class_names = {});

// The class names a saved model carries ("class_names" in its metadata), or empty.
std::vector<std::string> model_class_names(const std::map<std::string, std::string>& metadata);

// True when `path` is a final model save_model wrote for `spec`'s model at `step` (false when it
// is absent, unreadable or another).
bool is_final_model_of(const std::string& path, const JobSpec& spec, int64_t step);

}  // namespace sdp
