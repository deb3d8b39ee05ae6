// Fuzzes the index of a model written in parts (io/model_index.hpp), which `evaluate` and
// `predict` read: whatever it accepts names its parts beside it and writes back to the same.
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "io/model_index.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const sdp::ModelIndex index = sdp::parse_model_index(text, "model.safetensors.index.json");
    for (const auto& [name, file] : index.weight_map)
      if (file.empty() || file.find('/') != std::string::npos || file == "..") __builtin_trap();
    const sdp::ModelIndex back = sdp::parse_model_index(sdp::model_index_json(index), "again");
    if (back.metadata != index.metadata || back.weight_map != index.weight_map) __builtin_trap();
  } catch (const sdp::InputError&) {
  }
  return 0;
}
