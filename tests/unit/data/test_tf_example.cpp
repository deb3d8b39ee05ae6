#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/formats/tf_example.hpp"
#include "expect_input_error.hpp"

namespace sdp {
namespace {

using Bytes = std::vector<uint8_t>;
using testing::expect_input_error;

// A protobuf wire-format writer of the test's own, to build messages the encoder under test
// never writes (unpacked lists, unknown fields, groups, malformed bytes).
void varint(Bytes& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}
void tag(Bytes& out, uint32_t field, int wire_type) {
  varint(out, uint64_t{field} << 3 | static_cast<uint64_t>(wire_type));
}
void len(Bytes& out, uint32_t field, const Bytes& body) {
  tag(out, field, 2);
  varint(out, body.size());
  out.insert(out.end(), body.begin(), body.end());
}
Bytes str(const std::string& s) {
  return Bytes(s.begin(), s.end());
}
Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
Bytes field(uint32_t number, const Bytes& body) {
  Bytes out;
  len(out, number, body);
  return out;
}
Bytes varint_field(uint32_t number, uint64_t v) {
  Bytes out;
  tag(out, number, 0);
  varint(out, v);
  return out;
}
Bytes fixed32_field(uint32_t number, uint32_t v) {
  Bytes out;
  tag(out, number, 5);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  return out;
}
Bytes fixed64_field(uint32_t number, uint64_t v) {
  Bytes out;
  tag(out, number, 1);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  return out;
}
Bytes group(uint32_t number, const Bytes& body) {
  Bytes out;
  tag(out, number, 3);
  out.insert(out.end(), body.begin(), body.end());
  tag(out, number, 4);
  return out;
}
uint32_t float_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Unknown fields of every wire type, including a nested group, as a newer writer may add.
Bytes unknown_fields() {
  return cat({varint_field(15, 300), fixed64_field(16, 0x1122334455667788ull),
              field(17, str("future")),
              group(18, cat({varint_field(1, 5), group(2, field(3, str("deep")))})),
              fixed32_field(19, 7)});
}

// Example{features: Features{feature: entries}}, with unknown fields at the outer levels.
Bytes example(std::initializer_list<Bytes> entries) {
  Bytes features = unknown_fields();
  for (const Bytes& e : entries) len(features, 1, e);
  return cat({unknown_fields(), field(1, features)});
}
Bytes entry(const std::string& key, const Bytes& feature) {
  return cat({field(1, str(key)), unknown_fields(), field(2, feature)});
}
Bytes bytes_feature(std::initializer_list<Bytes> values) {
  Bytes list = unknown_fields();
  for (const Bytes& v : values) len(list, 1, v);
  return field(1, list);
}
Bytes int64_packed(std::initializer_list<int64_t> values) {
  Bytes packed;
  for (int64_t v : values) varint(packed, static_cast<uint64_t>(v));
  return field(3, cat({unknown_fields(), field(1, packed)}));
}
Bytes int64_unpacked(std::initializer_list<int64_t> values) {
  Bytes list = unknown_fields();
  for (int64_t v : values) {
    const Bytes f = varint_field(1, static_cast<uint64_t>(v));
    list.insert(list.end(), f.begin(), f.end());
  }
  return field(3, list);
}

TEST(TfExample, EncodeParseRoundTrip) {
  for (int64_t label : {int64_t{0}, int64_t{7}, int64_t{999}, int64_t{-3}, INT64_MIN, INT64_MAX}) {
    const Bytes image = {0xff, 0xd8, 0x00, 0x10, 0xff, 0xd9};
    const Bytes encoded = encode_example(image, label, "image/encoded", "image/class/label");
    const ExampleFields fields =
        parse_example(encoded.data(), encoded.size(), "image/encoded", "image/class/label");
    EXPECT_EQ(fields.image, image);
    EXPECT_EQ(fields.label, label);
  }
  const Bytes empty_image = encode_example({}, 4, "img", "cls");
  EXPECT_TRUE(parse_example(empty_image.data(), empty_image.size(), "img", "cls").image.empty());
}

// Example{"img": bytes_list ["ab"], "cls": int64_list [5]} as the wire format spells it,
// worked out by hand, in the order the encoder writes the entries (TensorFlow's own order
// of map entries is unspecified; any order parses the same).
TEST(TfExample, EncoderWritesTheWireFormat) {
  // clang-format off
  const Bytes expected = {
      0x0a, 0x1d,                                    // Example.features (1, LEN), 29 bytes
      0x0a, 0x0d,                                    //  Features.feature entry (1, LEN), 13 bytes
      0x0a, 0x03, 'i', 'm', 'g',                     //   key (1, LEN) "img"
      0x12, 0x06, 0x0a, 0x04, 0x0a, 0x02, 'a', 'b',  //   value (2): bytes_list (1) {value (1): "ab"}
      0x0a, 0x0c,                                    //  entry, 12 bytes
      0x0a, 0x03, 'c', 'l', 's',                     //   key "cls"
      0x12, 0x05, 0x1a, 0x03, 0x0a, 0x01, 0x05,      //   value: int64_list (3) {value (1): packed [5]}
  };
  // clang-format on
  EXPECT_EQ(encode_example({'a', 'b'}, 5, "img", "cls"), expected);
}

TEST(TfExample, PackedAndUnpackedLabelsAndUnknownFields) {
  const Bytes image = {1, 2, 3};
  for (bool packed : {true, false}) {
    SCOPED_TRACE(packed ? "packed" : "unpacked");
    const Bytes label = packed ? int64_packed({-7}) : int64_unpacked({-7});
    const Bytes ex = example({entry("other", bytes_feature({str("x")})),
                              entry("image", bytes_feature({image})), entry("label", label)});
    const ExampleFields fields = parse_example(ex.data(), ex.size(), "image", "label");
    EXPECT_EQ(fields.image, image);
    EXPECT_EQ(fields.label, -7);
  }
}

TEST(TfExample, GenericFeatures) {
  Bytes packed_floats;
  for (float f : {1.5f, -2.0f}) {
    const uint32_t b = float_bits(f);
    for (int i = 0; i < 4; ++i) packed_floats.push_back(static_cast<uint8_t>(b >> (8 * i)));
  }
  const Bytes floats_packed = field(2, field(1, packed_floats));
  const Bytes floats_unpacked = field(2, cat({fixed32_field(1, float_bits(0.25f)), unknown_fields(),
                                              fixed32_field(1, float_bits(3.0f))}));
  const Bytes ex = example({entry("fp", floats_packed), entry("fu", floats_unpacked),
                            entry("ints", int64_unpacked({1, 2, 300})),
                            entry("strs", bytes_feature({str("a"), str(""), str("ccc")})),
                            entry("none", Bytes{})});
  const auto features = parse_example_features(ex.data(), ex.size());
  ASSERT_EQ(features.size(), 5u);
  EXPECT_EQ(features.at("fp").kind, FeatureKind::kFloatList);
  EXPECT_EQ(features.at("fp").float_values, (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(features.at("fu").float_values, (std::vector<float>{0.25f, 3.0f}));
  EXPECT_EQ(features.at("ints").kind, FeatureKind::kInt64List);
  EXPECT_EQ(features.at("ints").int64_values, (std::vector<int64_t>{1, 2, 300}));
  const Feature& strs = features.at("strs");
  ASSERT_EQ(strs.bytes_values.size(), 3u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(strs.bytes_values[2].data),
                        strs.bytes_values[2].size),
            "ccc");
  EXPECT_EQ(strs.bytes_values[1].size, 0u);
  EXPECT_EQ(features.at("none").kind, FeatureKind::kNone);
  EXPECT_TRUE(parse_example_features(nullptr, 0).empty());
}

TEST(TfExample, ProtobufMergeRules) {
  // A oneof set twice: the last kind wins. A key given twice: the last entry wins. Two
  // Features messages: merged.
  const Bytes ex = cat(
      {field(1, cat({field(1, entry("label", cat({bytes_feature({str("no")}), int64_packed({3})}))),
                     field(1, entry("image", bytes_feature({str("old")})))})),
       field(1, field(1, entry("image", bytes_feature({str("new")}))))});
  const ExampleFields fields = parse_example(ex.data(), ex.size(), "image", "label");
  EXPECT_EQ(fields.image, str("new"));
  EXPECT_EQ(fields.label, 3);
  // The same list twice in one Feature: the values add up.
  const Bytes twice = example({entry("l", cat({int64_packed({1}), int64_unpacked({2})}))});
  EXPECT_EQ(parse_example_features(twice.data(), twice.size()).at("l").int64_values,
            (std::vector<int64_t>{1, 2}));
}

TEST(TfExample, MissingKeyWrongKindWrongCount) {
  const Bytes ex =
      example({entry("image/encoded", bytes_feature({str("jpg")})),
               entry("image/class/label", int64_packed({4})), entry("two", int64_packed({1, 2})),
               entry("floats", field(2, Bytes{}))});
  auto parse = [&](const std::string& image_key, const std::string& label_key) {
    parse_example(ex.data(), ex.size(), image_key, label_key);
  };
  expect_input_error(
      [&] { parse("image", "image/class/label"); },
      {"no feature 'image' (the image)", "'image/encoded'", "'image/class/label'", "'two'"});
  expect_input_error([&] { parse("image/encoded", "label"); }, {"no feature 'label' (the label)"});
  expect_input_error(
      [&] { parse("image/class/label", "image/class/label"); },
      {"feature 'image/class/label' (the image) is an int64_list, expected a bytes_list"});
  expect_input_error([&] { parse("image/encoded", "floats"); },
                     {"feature 'floats' (the label) is a float_list, expected an int64_list"});
  expect_input_error([&] { parse("image/encoded", "two"); },
                     {"feature 'two' (the label) holds 2 values, expected 1"});
  const Bytes empty = example({});
  expect_input_error([&] { parse_example(empty.data(), empty.size(), "image", "label"); },
                     {"no feature 'image'", "it has no features"});
}

TEST(TfExample, MalformedInputIsAnInputError) {
  const Bytes good = encode_example({9, 9, 9}, 2, "image", "label");
  // Every prefix of a valid message but the empty one and the whole is cut inside a field.
  for (std::size_t n = 1; n < good.size(); ++n)
    expect_input_error([&] { parse_example_features(good.data(), n); }, {"bad tf.train.Example"});

  Bytes eleven_byte_varint;
  tag(eleven_byte_varint, 20, 0);
  eleven_byte_varint.insert(eleven_byte_varint.end(), 10, 0xff);
  eleven_byte_varint.push_back(0x01);
  Bytes ten_byte_overflow;
  tag(ten_byte_overflow, 20, 0);
  ten_byte_overflow.insert(ten_byte_overflow.end(), 9, 0xff);
  ten_byte_overflow.push_back(0x02);
  Bytes length_past_end = {0x0a, 0x05, 0x01};
  Bytes huge_length = {0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  Bytes wire_type_7 = {0x0f, 0x00};
  Bytes field_zero = {0x00, 0x00};
  Bytes lone_end_group = {0x0c};
  Bytes unterminated_group = {0x0b, 0x08, 0x01};
  Bytes mismatched_group = {0x0b, 0x14};  // starts field 1, ends field 2
  Bytes deep_groups;
  for (int i = 0; i < 100; ++i) tag(deep_groups, 1, 3);
  for (int i = 0; i < 100; ++i) tag(deep_groups, 1, 4);
  Bytes odd_packed_floats = example({entry("f", field(2, field(1, Bytes{1, 2, 3})))});
  Bytes truncated_packed_int = example({entry("i", field(3, field(1, Bytes{0x80})))});
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, Bytes>>{
           {"varint longer than 64 bits", eleven_byte_varint},
           {"varint longer than 64 bits", ten_byte_overflow},
           {"claims 5 bytes, 1 are left", length_past_end},
           {"claims", huge_length},
           {"unknown wire type 7", wire_type_7},
           {"field number 0", field_zero},
           {"end-group tag without a start", lone_end_group},
           {"unterminated group", unterminated_group},
           {"mismatched end-group", mismatched_group},
           {"groups nested too deeply", deep_groups},
           {"not a multiple of 4", odd_packed_floats},
           {"truncated varint in packed Int64List", truncated_packed_int}})
    expect_input_error([&] { parse_example_features(bytes.data(), bytes.size()); },
                       {"bad tf.train.Example", name});
  // Groups nested as deep as allowed are skipped.
  Bytes ok_groups;
  for (int i = 0; i < 64; ++i) tag(ok_groups, 1, 3);
  for (int i = 0; i < 64; ++i) tag(ok_groups, 1, 4);
  EXPECT_TRUE(parse_example_features(ok_groups.data(), ok_groups.size()).empty());
}

// parse_named_features decodes what parse_example_features decodes, for the keys wanted only:
// packed and unpacked lists, unknown fields, a key written after its value, a repeated key.
TEST(TfExample, NamedFeaturesAgreeWithTheFullDecoder) {
  const Bytes value_first = cat({field(2, int64_packed({5, 6})), field(1, str("late"))});
  const Bytes ex = example({entry("ids", int64_unpacked({1, -2, 300})),
                            entry("vals", field(2, cat({fixed32_field(1, float_bits(0.5f)), unknown_fields(),
                                                        fixed32_field(1, float_bits(-1.0f))}))),
                            value_first, entry("dup", int64_packed({1})), entry("dup", int64_packed({2, 3})),
                            entry("skipped", field(2, field(1, Bytes{1, 2, 3})))});  // malformed, not wanted
  std::vector<NamedFeature> wanted(5);
  wanted[0].key = "ids";
  wanted[1].key = "vals";
  wanted[2].key = "late";
  wanted[3].key = "dup";
  wanted[4].key = "absent";
  wanted[4].found = true;  // from an earlier Example: reset
  wanted[4].feature.int64_values = {9};
  parse_named_features(ex.data(), ex.size(), wanted);
  EXPECT_EQ(wanted[0].feature.int64_values, (std::vector<int64_t>{1, -2, 300}));
  EXPECT_EQ(wanted[1].feature.kind, FeatureKind::kFloatList);
  EXPECT_EQ(wanted[1].feature.float_values, (std::vector<float>{0.5f, -1.0f}));
  EXPECT_TRUE(wanted[2].found);
  EXPECT_EQ(wanted[2].feature.int64_values, (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(wanted[3].feature.int64_values, (std::vector<int64_t>{2, 3}));  // the last entry wins
  EXPECT_FALSE(wanted[4].found);
  EXPECT_TRUE(wanted[4].feature.int64_values.empty());
  // The full decoder rejects the malformed list nobody asked for.
  expect_input_error([&] { parse_example_features(ex.data(), ex.size()); }, {"not a multiple of 4"});
  // Malformed bytes outside the lists are rejected all the same.
  const Bytes cut(ex.begin(), ex.begin() + 7);
  expect_input_error([&] { parse_named_features(cut.data(), cut.size(), wanted); }, {"bad tf.train.Example"});
}

TEST(TfExample, NumericExampleEncoding) {
  const std::vector<float> floats{1.5f, -0.0f, 3e38f};
  const std::vector<int64_t> ints{0, 127, 128, -1, INT64_MIN, INT64_MAX};
  Bytes out{1, 2, 3};  // replaced
  encode_numeric_example({NumericFeature::float_list("f", floats.data(), floats.size()),
                          NumericFeature::int64_list("i", ints.data(), ints.size()),
                          NumericFeature::float_list("empty", nullptr, 0)},
                         out);
  const auto features = parse_example_features(out.data(), out.size());
  ASSERT_EQ(features.size(), 3u);
  EXPECT_EQ(features.at("f").float_values, floats);
  EXPECT_EQ(features.at("i").int64_values, ints);
  EXPECT_EQ(features.at("empty").kind, FeatureKind::kFloatList);
  EXPECT_TRUE(features.at("empty").float_values.empty());
  // The wire format of {"k": int64_list [1, 300]}, worked out by hand.
  const std::vector<int64_t> two{1, 300};
  encode_numeric_example({NumericFeature::int64_list("k", two.data(), 2)}, out);
  // clang-format off
  const Bytes expected = {
      0x0a, 0x0e,                    // Example.features (1, LEN), 14 bytes
      0x0a, 0x0c,                    //  Features.feature entry, 12 bytes
      0x0a, 0x01, 'k',               //   key "k"
      0x12, 0x07, 0x1a, 0x05,        //   value (2): Feature{int64_list (3), 5 bytes}
      0x0a, 0x03, 0x01, 0xac, 0x02,  //    value (1): packed [1, 300]
  };
  // clang-format on
  EXPECT_EQ(out, expected);
}

}  // namespace
}  // namespace sdp
