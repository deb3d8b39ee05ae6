#include "io/model_index.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace sdp {

ModelIndex parse_model_index(const std::string& text, const std::string& path) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not JSON: " + e.what());
  }
  if (!doc.is_object()) throw InputError(path + ": a model index is a JSON object");
  ModelIndex index;
  const auto strings = [&](const char* key, std::map<std::string, std::string>& out) {
    const auto it = doc.find(key);
    if (it == doc.end() || !it->is_object()) throw InputError(path + ": no '" + key + "' object");
    for (const auto& [name, value] : it->items()) {
      if (!value.is_string())
        throw InputError(path + ": '" + key + "." + name + "' is " + value.type_name() + ", not a string");
      out[name] = value.get<std::string>();
    }
  };
  strings("metadata", index.metadata);
  strings("weight_map", index.weight_map);
  for (const auto& [name, file] : index.weight_map)
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
      throw InputError(path + ": 'weight_map." + name + "' is '" + file +
                       "': the parts lie beside the index, named without a directory");
  return index;
}

ModelIndex read_model_index(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot read the model's index: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_model_index(text.str(), path);
}

std::string model_index_json(const ModelIndex& index) {
  nlohmann::json doc;
  doc["metadata"] = index.metadata;
  doc["weight_map"] = index.weight_map;
  return doc.dump(2) + "\n";
}

}  // namespace sdp
