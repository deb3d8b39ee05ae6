#include "config/experimental.hpp"

#include <stdexcept>

namespace sdp {
namespace {

// The spec's field behind each key of the list.
const std::string& field_of(const JobSpec& spec, std::string_view key) {
  if (key == "model.batchnorm") return spec.model.batchnorm;
  if (key == "model.grad_sum") return spec.model.grad_sum;
  if (key == "model.memory_plan") return spec.model.memory_plan;
  if (key == "optimizer.capturable") return spec.optimizer.capturable;
  if (key == "distributed.stream_ordered") return spec.distributed.stream_ordered;
  if (key == "train.conv_algorithms") return spec.train.conv_algorithms;
  if (key == "data.decode_roi") return spec.data.decode_roi;
  if (key == "data.nvjpeg_backend") return spec.data.nvjpeg_backend;
  throw std::logic_error("experimental_values: no field for key " + std::string(key));
}

}  // namespace

const std::vector<ExperimentalValue>& experimental_values() {
  static const std::vector<ExperimentalValue> values = {
      {"model.batchnorm", "folded_inner", "the folded BatchNorm passes (NormConvolution)"},
      {"model.batchnorm", "folded", "the folded BatchNorm passes (NormConvolution)"},
      {"model.grad_sum", "fused", "the residual gradient summed in the convolution's epilogue"},
      {"model.memory_plan", "lean", "the lean arena on a GPU"},
      {"optimizer.capturable", "on", "the update decided on the device"},
      {"distributed.stream_ordered", "on", "buckets ordered on the GPU's streams"},
      {"train.conv_algorithms", "measured", "taking the measured choices back from a checkpoint on resume"},
      {"data.decode_roi", "on", "nvJPEG's region decoding"},
      {"data.nvjpeg_backend", "hardware", "choosing nvJPEG's backend by hand"},
      {"data.nvjpeg_backend", "gpu_hybrid", "choosing nvJPEG's backend by hand"},
      {"data.nvjpeg_backend", "nvjpeg_default", "choosing nvJPEG's backend by hand"},
  };
  return values;
}

std::vector<ExperimentalValue> experimental_values_used(const JobSpec& spec) {
  std::vector<ExperimentalValue> used;
  for (const ExperimentalValue& v : experimental_values())
    if (field_of(spec, v.key) == v.value) used.push_back(v);
  return used;
}

std::string describe_experimental_values(const JobSpec& spec) {
  const auto used = experimental_values_used(spec);
  if (used.empty()) return "";
  std::string text;
  for (const ExperimentalValue& v : used) {
    if (!text.empty()) text += ", ";
    text += std::string(v.key) + "=" + std::string(v.value) + " (" + std::string(v.unchecked) + ")";
  }
  return text + "; not yet run on a GPU (docs/job-spec.md#experimental-keys)";
}

}  // namespace sdp
