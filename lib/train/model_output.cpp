#include "train/model_output.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/job_spec_yaml.hpp"
#include "core/error.hpp"
#include "data/formats/data_files.hpp"
#include "io/safetensors.hpp"

namespace sdp {

void save_model(const nn::Model& model, const JobSpec& spec, const World& world, const TrainResult& result,
                int64_t epoch, const std::vector<std::string>& class_names) {
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
  const std::filesystem::path dir(spec.output.model_dir);
  const std::filesystem::path labels = dir / "labels.txt";
  std::error_code ec;
  if (class_names.empty()) {
    std::filesystem::remove(labels, ec);  // a previous job's names would mislabel this model
  } else {
    metadata["class_names"] = nlohmann::json(class_names).dump();
    std::string text;
    for (const std::string& name : class_names) text += name + "\n";
    write_file_atomically(labels.string(), text);
  }
  save_safetensors((dir / "model.safetensors").string(), tensors, metadata);
}

std::vector<std::string> model_class_names(const std::map<std::string, std::string>& metadata) {
  const auto it = metadata.find("class_names");
  if (it == metadata.end()) return {};
  try {
    return nlohmann::json::parse(it->second).get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception&) {
    return {};  // written by another tool: the labels are shown as numbers
  }
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
