// The index of a model written in parts (io/model_index.hpp): what it writes reads back, and
// every other text is an InputError naming the file and the key, parts outside the index's
// directory included.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "io/model_index.hpp"

namespace sdp {
namespace {

TEST(ModelIndex, WhatIsWrittenReadsBack) {
  ModelIndex index;
  index.metadata = {{"model", "deepfm"}, {"table_shards", "2"}};
  index.weight_map = {{"bias", "model-00001-of-00002.safetensors"},
                      {"table.shard-00002-of-00002", "model-00002-of-00002.safetensors"}};
  const ModelIndex back = parse_model_index(model_index_json(index), "index.json");
  EXPECT_EQ(back.metadata, index.metadata);
  EXPECT_EQ(back.weight_map, index.weight_map);
}

TEST(ModelIndex, AnythingElseNamesTheFileAndKey) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "not JSON"},
      {"[1, 2]", "a JSON object"},
      {R"({"weight_map": {}})", "no 'metadata'"},
      {R"({"metadata": {}})", "no 'weight_map'"},
      {R"({"metadata": {"table_shards": 2}, "weight_map": {}})", "'metadata.table_shards' is number"},
      {R"({"metadata": {}, "weight_map": {"bias": 3}})", "'weight_map.bias' is number"},
      {R"({"metadata": {}, "weight_map": {"bias": "../../etc/passwd"}})", "without a directory"},
      {R"({"metadata": {}, "weight_map": {"bias": "/abs/part.safetensors"}})", "without a directory"},
      {R"({"metadata": {}, "weight_map": {"bias": ""}})", "without a directory"},
  };
  for (const auto& [text, expected] : cases) {
    try {
      parse_model_index(text, "m/model.safetensors.index.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("m/model.safetensors.index.json"), std::string::npos) << message;
      EXPECT_NE(message.find(expected), std::string::npos) << text << " -> " << message;
    }
  }
  EXPECT_THROW(read_model_index("/nonexistent/model.safetensors.index.json"), InputError);
}

}  // namespace
}  // namespace sdp
