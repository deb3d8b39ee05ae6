#include "train/model_output.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "config/job_spec_yaml.hpp"
#include "core/error.hpp"
#include "io/safetensors.hpp"

namespace sdp {

void save_model(const nn::Model& model, const JobSpec& spec, const World& world, const TrainResult& result,
                int64_t epoch) {
  std::vector<NamedTensor> tensors;
  for (const Param& p : model.store().params()) tensors.push_back({p.name, p.value});
  for (const Buffer& b : model.store().buffers()) tensors.push_back({b.name, b.value});
  Shape input = model.input_shape();
  std::map<std::string, std::string> metadata = {
      {"format", "sdp-train model"},
      {"model", spec.model.name},
      {"num_classes", std::to_string(model.num_classes())},
      {"input_shape", shape_str(input)},
      {"step", std::to_string(result.steps)},
      {"epoch", std::to_string(epoch)},
      {"world_size", std::to_string(world.size())},
      {"test_accuracy", std::to_string(result.test_accuracy)},
      {"job_spec", job_spec_to_yaml(spec)},
  };
  save_safetensors((std::filesystem::path(spec.output.model_dir) / "model.safetensors").string(), tensors,
                   metadata);
}

bool is_final_model_of(const std::string& path, const JobSpec& spec, int64_t step) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  try {
    const std::map<std::string, std::string> meta = load_safetensors(path).metadata;
    auto is = [&](const char* key, const std::string& value) {
      auto it = meta.find(key);
      return it != meta.end() && it->second == value;
    };
    return is("format", "sdp-train model") && is("model", spec.model.name) && is("step", std::to_string(step));
  } catch (const Error&) {
    return false;
  }
}

}  // namespace sdp
