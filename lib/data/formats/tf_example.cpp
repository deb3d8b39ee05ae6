#include "data/formats/tf_example.hpp"

#include <cstring>
#include <stdexcept>
#include <string_view>

#include "core/bytes.hpp"
#include "core/error.hpp"
#include "data/formats/printable.hpp"

namespace sdp {

namespace {

enum WireType : int {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5
};
constexpr int kMaxGroupDepth = 64;

[[noreturn]] void bad(const std::string& what) {
  throw InputError("bad tf.train.Example: " + what);
}

// One field as it appears on the wire: a number, a wire type and its value (the integer of
// a varint or fixed field, the bytes of a length-delimited one). Groups are skipped whole.
struct WireField {
  uint32_t number = 0;
  int wire_type = 0;
  uint64_t scalar = 0;
  const uint8_t* bytes = nullptr;
  std::size_t size = 0;
};

// Reads the fields of one message, never past its end.
class WireReader {
 public:
  WireReader(const uint8_t* data, std::size_t size, const char* message)
      : p_(data), end_(data + size), message_(message) {}
  WireReader(const WireField& field, const char* message)
      : WireReader(field.bytes, field.size, message) {}

  bool done() const { return p_ == end_; }

  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0;; shift += 7) {
      if (p_ == end_) bad(std::string("truncated varint in ") + message_);
      const uint8_t byte = *p_++;
      // The tenth byte holds bit 63 only, so it is 0 or 1 and ends the varint.
      if (shift == 63 && byte > 1) bad(std::string("varint longer than 64 bits in ") + message_);
      value |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return value;
    }
  }

  WireField next() {
    WireField f = read_tag();
    switch (f.wire_type) {
      case kVarint:
        f.scalar = varint();
        break;
      case kFixed64:
        f.scalar = fixed(8);
        break;
      case kFixed32:
        f.scalar = fixed(4);
        break;
      case kLengthDelimited: {
        const uint64_t length = varint();
        if (length > static_cast<uint64_t>(end_ - p_))
          bad("field " + std::to_string(f.number) + " of " + message_ + " claims " +
              std::to_string(length) + " bytes, " + std::to_string(end_ - p_) + " are left");
        f.bytes = p_;
        f.size = static_cast<std::size_t>(length);
        p_ += length;
        break;
      }
      case kStartGroup:
        skip_group(f.number);
        break;
      case kEndGroup:
        bad(std::string("end-group tag without a start in ") + message_);
    }
    return f;
  }

 private:
  WireField read_tag() {
    const uint64_t tag = varint();
    WireField f;
    f.wire_type = static_cast<int>(tag & 7);
    if (tag >> 3 == 0 || tag >> 3 > 0x1fffffff)
      bad("field number " + std::to_string(tag >> 3) + " out of range in " + message_);
    f.number = static_cast<uint32_t>(tag >> 3);
    if (f.wire_type > kFixed32)
      bad("unknown wire type " + std::to_string(f.wire_type) + " (field " +
          std::to_string(f.number) + ") in " + message_);
    return f;
  }

  uint64_t fixed(int bytes) {
    if (end_ - p_ < bytes) bad(std::string("truncated fixed-width field in ") + message_);
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p_[i];
    p_ += bytes;
    return v;
  }

  // Skips to the end-group tag matching `number`, through nested groups, without recursion.
  void skip_group(uint32_t number) {
    std::vector<uint32_t> open{number};
    while (!open.empty()) {
      if (p_ == end_) bad(std::string("unterminated group in ") + message_);
      const WireField f = read_tag();
      switch (f.wire_type) {
        case kVarint:
          varint();
          break;
        case kFixed64:
          fixed(8);
          break;
        case kFixed32:
          fixed(4);
          break;
        case kLengthDelimited: {
          const uint64_t length = varint();
          if (length > static_cast<uint64_t>(end_ - p_))
            bad(std::string("truncated group in ") + message_);
          p_ += length;
          break;
        }
        case kStartGroup:
          if (open.size() >= kMaxGroupDepth)
            bad(std::string("groups nested too deeply in ") + message_);
          open.push_back(f.number);
          break;
        case kEndGroup:
          if (f.number != open.back()) bad(std::string("mismatched end-group tag in ") + message_);
          open.pop_back();
          break;
      }
    }
  }

  const uint8_t* p_;
  const uint8_t* end_;
  const char* message_;
};

float float_from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Empties `feature` (keeping its lists' storage) and makes it of `kind`.
void reset_feature(Feature& feature, FeatureKind kind) {
  feature.kind = kind;
  feature.bytes_values.clear();
  feature.float_values.clear();
  feature.int64_values.clear();
}

// A list message ({repeated value = 1}) merged into `feature`, whose kind is already set.
void parse_list(const WireField& list, Feature& feature) {
  switch (feature.kind) {
    case FeatureKind::kBytesList: {
      WireReader r(list, "BytesList");
      while (!r.done()) {
        const WireField f = r.next();
        if (f.number == 1 && f.wire_type == kLengthDelimited)
          feature.bytes_values.push_back({f.bytes, f.size});
      }
      break;
    }
    case FeatureKind::kFloatList: {
      WireReader r(list, "FloatList");
      while (!r.done()) {
        const WireField f = r.next();
        if (f.number != 1) continue;
        if (f.wire_type == kFixed32) {
          feature.float_values.push_back(float_from_bits(static_cast<uint32_t>(f.scalar)));
        } else if (f.wire_type == kLengthDelimited) {  // packed
          if (f.size % 4 != 0)
            bad("packed FloatList of " + std::to_string(f.size) + " bytes, not a multiple of 4");
          for (std::size_t i = 0; i < f.size; i += 4) {
            const uint8_t* b = f.bytes + i;
            feature.float_values.push_back(float_from_bits(uint32_t{b[0]} | uint32_t{b[1]} << 8 |
                                                           uint32_t{b[2]} << 16 |
                                                           uint32_t{b[3]} << 24));
          }
        }
      }
      break;
    }
    case FeatureKind::kInt64List: {
      WireReader r(list, "Int64List");
      while (!r.done()) {
        const WireField f = r.next();
        if (f.number != 1) continue;
        if (f.wire_type == kVarint) {
          feature.int64_values.push_back(static_cast<int64_t>(f.scalar));
        } else if (f.wire_type == kLengthDelimited) {  // packed
          WireReader packed(f, "packed Int64List");
          while (!packed.done())
            feature.int64_values.push_back(static_cast<int64_t>(packed.varint()));
        }
      }
      break;
    }
    case FeatureKind::kNone:
      break;
  }
}

// A Feature message merged into `feature` (a repeated message field merges, in protobuf).
void merge_feature(const WireField& field, Feature& feature) {
  WireReader r(field, "Feature");
  while (!r.done()) {
    const WireField f = r.next();
    if (f.wire_type != kLengthDelimited || f.number < 1 || f.number > 3) continue;
    const auto kind = static_cast<FeatureKind>(f.number);    // 1, 2, 3 = bytes, float, int64
    if (kind != feature.kind) reset_feature(feature, kind);  // a oneof: the last one set wins
    parse_list(f, feature);
  }
}

std::size_t varint_size(uint64_t v) {
  std::size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

// A length-delimited field's tag and length (the body follows), and its size with the body.
void put_length_prefix(std::vector<uint8_t>& out, uint32_t number, std::size_t size) {
  put_varint(out, uint64_t{number} << 3 | kLengthDelimited);
  put_varint(out, size);
}
std::size_t length_delimited_size(uint32_t number, std::size_t size) {
  return varint_size(uint64_t{number} << 3 | kLengthDelimited) + varint_size(size) + size;
}

void put_bytes_field(std::vector<uint8_t>& out, uint32_t number, const uint8_t* data,
                     std::size_t size) {
  put_varint(out, uint64_t{number} << 3 | kLengthDelimited);
  put_varint(out, size);
  out.insert(out.end(), data, data + size);
}

void put_bytes_field(std::vector<uint8_t>& out, uint32_t number,
                     const std::vector<uint8_t>& bytes) {
  put_bytes_field(out, number, bytes.data(), bytes.size());
}

std::vector<uint8_t> map_entry(const std::string& key, const std::vector<uint8_t>& feature) {
  std::vector<uint8_t> entry;
  put_bytes_field(entry, 1, reinterpret_cast<const uint8_t*>(key.data()), key.size());
  put_bytes_field(entry, 2, feature);
  return entry;
}

std::string key_list(const std::map<std::string, Feature>& features) {
  return features.empty() ? "no features" : "features " + feature_keys_text(features);
}

std::string kind_with_article(FeatureKind kind) {
  if (kind == FeatureKind::kNone) return "empty (no list set)";
  return std::string(kind == FeatureKind::kInt64List ? "an " : "a ") + feature_kind_name(kind);
}

const Feature& single_value_feature(const std::map<std::string, Feature>& features,
                                    const std::string& key, FeatureKind kind, const char* role) {
  const auto it = features.find(key);
  if (it == features.end())
    throw InputError("tf.train.Example has no feature " + printable(key) + " (the " + role +
                     "); it has " + key_list(features));
  const Feature& f = it->second;
  if (f.kind != kind)
    throw InputError("tf.train.Example feature " + printable(key) + " (the " + role + ") is " +
                     kind_with_article(f.kind) + ", expected " + kind_with_article(kind));
  const std::size_t count =
      kind == FeatureKind::kBytesList ? f.bytes_values.size() : f.int64_values.size();
  if (count != 1)
    throw InputError("tf.train.Example feature " + printable(key) + " (the " + role + ") holds " +
                     std::to_string(count) + " values, expected 1");
  return f;
}

}  // namespace

const char* feature_kind_name(FeatureKind kind) {
  switch (kind) {
    case FeatureKind::kBytesList:
      return "bytes_list";
    case FeatureKind::kFloatList:
      return "float_list";
    case FeatureKind::kInt64List:
      return "int64_list";
    case FeatureKind::kNone:
      break;
  }
  return "no value";
}

std::string feature_keys_text(const std::map<std::string, Feature>& features) {
  std::string keys;
  int shown = 0;
  for (const auto& entry : features) {
    if (shown == 20) {
      keys += ", ... (" + std::to_string(features.size()) + " in all)";
      break;
    }
    keys += (shown++ ? ", " : "") + printable(entry.first, 64);
  }
  return keys;
}

std::map<std::string, Feature> parse_example_features(const uint8_t* data, std::size_t size) {
  std::map<std::string, Feature> features;
  WireReader example(data, size, "Example");
  while (!example.done()) {
    const WireField features_field = example.next();
    if (features_field.number != 1 || features_field.wire_type != kLengthDelimited) continue;
    WireReader map(features_field, "Features");
    while (!map.done()) {
      const WireField entry_field = map.next();
      if (entry_field.number != 1 || entry_field.wire_type != kLengthDelimited) continue;
      std::string key;
      Feature value;
      WireReader entry(entry_field, "Features.feature entry");
      while (!entry.done()) {
        const WireField f = entry.next();
        if (f.wire_type != kLengthDelimited) continue;
        if (f.number == 1) key.assign(reinterpret_cast<const char*>(f.bytes), f.size);
        if (f.number == 2) merge_feature(f, value);
      }
      features[key] = std::move(value);  // a repeated key replaces the earlier entry
    }
  }
  return features;
}

void parse_named_features(const uint8_t* data, std::size_t size,
                          std::vector<NamedFeature>& wanted) {
  for (NamedFeature& w : wanted) {
    w.found = false;
    reset_feature(w.feature, FeatureKind::kNone);
  }
  WireReader example(data, size, "Example");
  while (!example.done()) {
    const WireField features_field = example.next();
    if (features_field.number != 1 || features_field.wire_type != kLengthDelimited) continue;
    WireReader map(features_field, "Features");
    while (!map.done()) {
      const WireField entry_field = map.next();
      if (entry_field.number != 1 || entry_field.wire_type != kLengthDelimited) continue;
      // The key may follow the value on the wire (protobuf allows any order): find it first.
      std::string_view key;
      WireReader keys(entry_field, "Features.feature entry");
      while (!keys.done()) {
        const WireField f = keys.next();
        if (f.number == 1 && f.wire_type == kLengthDelimited)
          key = std::string_view(reinterpret_cast<const char*>(f.bytes), f.size);
      }
      NamedFeature* target = nullptr;
      for (NamedFeature& w : wanted)
        if (w.key == key) target = &w;
      if (target == nullptr) continue;
      target->found = true;
      reset_feature(target->feature,
                    FeatureKind::kNone);  // a repeated key replaces the earlier entry
      WireReader entry(entry_field, "Features.feature entry");
      while (!entry.done()) {
        const WireField f = entry.next();
        if (f.number == 2 && f.wire_type == kLengthDelimited) merge_feature(f, target->feature);
      }
    }
  }
}

void encode_numeric_example(std::initializer_list<NumericFeature> features,
                            std::vector<uint8_t>& out) {
  // Protobuf puts each message's length before it, so the sizes are added up first, from the
  // innermost list out, and the bytes then written front to back into `out` with no temporary.
  auto packed_size = [](const NumericFeature& f) {
    if (f.kind == FeatureKind::kFloatList) return 4 * f.count;
    std::size_t n = 0;
    for (std::size_t i = 0; i < f.count; ++i) n += varint_size(static_cast<uint64_t>(f.int64s[i]));
    return n;
  };
  // An empty packed list is left out of its list message, as protobuf does.
  auto list_size = [](std::size_t packed) {
    return packed == 0 ? 0 : length_delimited_size(1, packed);
  };
  auto feature_number = [](const NumericFeature& f) -> uint32_t {
    if (f.kind != FeatureKind::kFloatList && f.kind != FeatureKind::kInt64List)
      throw std::logic_error("encode_numeric_example: feature " + std::string(f.key) +
                             " is not numeric");
    return static_cast<uint32_t>(f.kind);  // Feature's fields: float_list = 2, int64_list = 3
  };
  auto entry_size = [&](const NumericFeature& f, std::size_t packed) {
    return length_delimited_size(1, f.key.size()) +
           length_delimited_size(2, length_delimited_size(feature_number(f), list_size(packed)));
  };
  std::size_t features_size = 0;
  for (const NumericFeature& f : features)
    features_size += length_delimited_size(1, entry_size(f, packed_size(f)));

  out.clear();
  out.reserve(length_delimited_size(1, features_size));
  put_length_prefix(out, 1, features_size);  // Example.features
  for (const NumericFeature& f : features) {
    const std::size_t packed = packed_size(f);
    put_length_prefix(out, 1, entry_size(f, packed));  // Features.feature map entry
    put_bytes_field(out, 1, reinterpret_cast<const uint8_t*>(f.key.data()), f.key.size());
    put_length_prefix(out, 2,
                      length_delimited_size(feature_number(f), list_size(packed)));  // the Feature
    put_length_prefix(out, feature_number(f), list_size(packed));  // float_list or int64_list
    if (packed == 0) continue;
    put_length_prefix(out, 1, packed);  // the packed values
    for (std::size_t i = 0; i < f.count; ++i) {
      if (f.kind == FeatureKind::kFloatList) {
        uint32_t bits;
        std::memcpy(&bits, &f.floats[i], sizeof bits);
        for (int b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(bits >> (8 * b)));
      } else {
        put_varint(out,
                   static_cast<uint64_t>(f.int64s[i]));  // negative: ten bytes, as protobuf writes
      }
    }
  }
}

ExampleFields parse_example(const uint8_t* data, std::size_t size, const std::string& image_key,
                            const std::string& label_key) {
  const std::map<std::string, Feature> features = parse_example_features(data, size);
  const ByteView image =
      single_value_feature(features, image_key, FeatureKind::kBytesList, "image").bytes_values[0];
  ExampleFields fields;
  fields.label =
      single_value_feature(features, label_key, FeatureKind::kInt64List, "label").int64_values[0];
  fields.image.assign(image.data, image.data + image.size);
  return fields;
}

std::vector<uint8_t> encode_example(const std::vector<uint8_t>& image, int64_t label,
                                    const std::string& image_key, const std::string& label_key) {
  std::vector<uint8_t> bytes_list, image_feature;
  put_bytes_field(bytes_list, 1, image);
  put_bytes_field(image_feature, 1, bytes_list);  // Feature.bytes_list

  std::vector<uint8_t> packed, int64_list, label_feature;
  put_varint(packed, static_cast<uint64_t>(label));  // negative: ten bytes, two's complement
  put_bytes_field(int64_list, 1, packed);
  put_bytes_field(label_feature, 3, int64_list);  // Feature.int64_list

  std::vector<uint8_t> features, example;
  put_bytes_field(features, 1, map_entry(image_key, image_feature));
  put_bytes_field(features, 1, map_entry(label_key, label_feature));
  put_bytes_field(example, 1, features);  // Example.features
  return example;
}

}  // namespace sdp
