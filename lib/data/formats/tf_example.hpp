// tf.train.Example, the payload of TFRecord image data sets, decoded from the protobuf wire
// format without protobuf: Example{features = 1: Features{feature = 1: map<string, Feature>}},
// Feature a oneof of bytes_list = 1, float_list = 2, int64_list = 3, each {repeated value = 1}
// (floats and int64s packed or not). Unknown fields of every wire type are skipped, as
// protobuf does; repeated messages merge and a repeated map key replaces the earlier entry.
// The decoder is bounded for hostile input: no read past the end, no recursion (groups are
// skipped iteratively, 64 levels deep at most), memory linear in the input.
// Errors are InputError without the file and record, which the caller adds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace sdp {

enum class FeatureKind { kNone, kBytesList, kFloatList, kInt64List };
// "bytes_list", "float_list", "int64_list", or "no value" (a Feature with no list set).
const char* feature_kind_name(FeatureKind kind);

struct ByteView {
  const uint8_t* data = nullptr;
  std::size_t size = 0;
};

// One feature: the list its kind names is filled, the others are empty.
struct Feature {
  FeatureKind kind = FeatureKind::kNone;
  std::vector<ByteView> bytes_values;  // views into the buffer that was parsed
  std::vector<float> float_values;
  std::vector<int64_t> int64_values;
};

// Every feature of a serialized Example, by key. The bytes_values views point into
// data[0, size), which must outlive the result.
std::map<std::string, Feature> parse_example_features(const uint8_t* data, std::size_t size);
// The features' keys for a message: "a, b, ..." (printable, the first 20, then the count).
std::string feature_keys_text(const std::map<std::string, Feature>& features);

// A feature wanted by key, for readers of many small Examples (CTR samples): only the wanted
// features are decoded, and their lists' storage is reused from one Example to the next.
struct NamedFeature {
  std::string key;
  bool found = false;  // the Example has the key (its Feature may still have no list: kNone)
  Feature feature;
};

// Sets found and feature of each entry of `wanted` from a serialized Example, with the rules
// of parse_example_features for the features it decodes (packed or unpacked lists, a repeated
// key replaces the earlier entry). The features not wanted are skipped, not decoded: an Example
// whose unwanted lists are malformed may pass here and fail parse_example_features. Throws
// InputError as parse_example_features does.
void parse_named_features(const uint8_t* data, std::size_t size, std::vector<NamedFeature>& wanted);

// A numeric list for encode_numeric_example, made by float_list or int64_list (a view: the
// values are read when encoded).
struct NumericFeature {
  static NumericFeature float_list(std::string_view key, const float* values, std::size_t count) {
    return {key, FeatureKind::kFloatList, values, nullptr, count};
  }
  static NumericFeature int64_list(std::string_view key, const int64_t* values, std::size_t count) {
    return {key, FeatureKind::kInt64List, nullptr, values, count};
  }
  std::string_view key;
  FeatureKind kind = FeatureKind::kFloatList;
  const float* floats = nullptr;
  const int64_t* int64s = nullptr;
  std::size_t count = 0;
};

// A serialized Example of numeric list features, in the order given, each list packed as
// TensorFlow writes it (an empty list is an empty message, as there). `out` is replaced, its
// storage reused: a writer of millions of small Examples allocates nothing per Example.
void encode_numeric_example(std::initializer_list<NumericFeature> features,
                            std::vector<uint8_t>& out);

// What training reads from an image Example: one encoded image, one integer label.
struct ExampleFields {
  std::vector<uint8_t> image;
  int64_t label = 0;
};

// The bytes_list feature `image_key` (exactly one value) and the int64_list feature
// `label_key` (exactly one value). Throws InputError naming a missing key (and the keys the
// example has), a feature of the wrong kind, or a wrong number of values.
ExampleFields parse_example(const uint8_t* data, std::size_t size, const std::string& image_key,
                            const std::string& label_key);

// The serialized Example parse_example reads back (the label packed, as TensorFlow writes
// it); for tests and the data converter.
std::vector<uint8_t> encode_example(const std::vector<uint8_t>& image, int64_t label,
                                    const std::string& image_key, const std::string& label_key);

}  // namespace sdp
