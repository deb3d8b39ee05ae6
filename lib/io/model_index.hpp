// The index of a model written in parts (model.safetensors.index.json), as sharded safetensors
// models have it: {"metadata": {...}, "weight_map": {tensor name: file}}. The parts lie beside
// the index, so a file name is a plain name: one with a directory ('/') or "..", or empty, is
// refused, as is a metadata value that is not a string.
#pragma once

#include <map>
#include <string>

namespace sdp {

struct ModelIndex {
  std::map<std::string, std::string> metadata;
  std::map<std::string, std::string> weight_map;  // tensor name -> file beside the index
};

// InputError naming `path` (and the key) when `text` is not such an index.
ModelIndex parse_model_index(const std::string& text, const std::string& path);
ModelIndex read_model_index(const std::string& path);
// The index as JSON text (what parse_model_index reads back).
std::string model_index_json(const ModelIndex& index);

}  // namespace sdp
