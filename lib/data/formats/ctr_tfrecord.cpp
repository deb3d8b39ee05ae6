#include "data/formats/ctr_tfrecord.hpp"

#include <cstdio>
#include <stdexcept>

#include "core/error.hpp"
#include "data/formats/printable.hpp"
#include "data/formats/tfrecord.hpp"

namespace sdp {

namespace {

enum Wanted : std::size_t { kLabel = 0, kIds = 1, kValues = 2 };

// The keys an Example has, for the message about one it lacks; "" when they cannot be listed.
std::string keys_of(const uint8_t* data, std::size_t size) {
  try {
    const auto features = parse_example_features(data, size);
    return features.empty() ? "; it has no features" : "; it has " + feature_keys_text(features);
  } catch (const InputError&) {
    return "";
  }
}

std::string kind_text(FeatureKind kind) {
  if (kind == FeatureKind::kNone) return "empty (no list set)";
  return std::string(kind == FeatureKind::kInt64List ? "an " : "a ") + feature_kind_name(kind);
}

const Feature& required(const NamedFeature& wanted, const char* role, const uint8_t* data,
                        std::size_t size) {
  if (!wanted.found)
    throw InputError("tf.train.Example has no feature " + printable(wanted.key) + " (the " + role +
                     ")" + keys_of(data, size));
  return wanted.feature;
}

[[noreturn]] void wrong_kind(const NamedFeature& wanted, const char* role,
                             const std::string& expected) {
  throw InputError("tf.train.Example feature " + printable(wanted.key) + " (the " + role + ") is " +
                   kind_text(wanted.feature.kind) + ", expected " + expected);
}

float label_of(const NamedFeature& wanted, const uint8_t* data, std::size_t size) {
  const Feature& f = required(wanted, "label", data, size);
  double value = 0;
  std::size_t count = 0;
  if (f.kind == FeatureKind::kFloatList) {
    count = f.float_values.size();
    if (count == 1) value = f.float_values[0];
  } else if (f.kind == FeatureKind::kInt64List) {
    count = f.int64_values.size();
    if (count == 1) value = static_cast<double>(f.int64_values[0]);
  } else {
    wrong_kind(wanted, "label", "a float_list (or an int64_list) of one value");
  }
  if (count != 1)
    throw InputError("tf.train.Example feature " + printable(wanted.key) + " (the label) holds " +
                     std::to_string(count) + " values, expected 1");
  if (value != 0 && value != 1 && value != -1) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    throw InputError("tf.train.Example feature " + printable(wanted.key) + " (the label) is " +
                     text + ", expected 0 or 1 (or -1 / +1)");
  }
  return value == 1 ? 1.0f : 0.0f;  // -1 means "not clicked", as 0 does
}

}  // namespace

CtrExampleDecoder::CtrExampleDecoder(const CtrReadOptions& keys) : wanted_(3) {
  wanted_[kLabel].key = keys.label_key;
  wanted_[kIds].key = keys.ids_key;
  wanted_[kValues].key = keys.values_key;
}

void CtrExampleDecoder::decode(const uint8_t* data, std::size_t size, CtrSample& sample) {
  parse_named_features(data, size, wanted_);
  sample.label = label_of(wanted_[kLabel], data, size);

  const Feature& ids = required(wanted_[kIds], "ids", data, size);
  if (ids.kind != FeatureKind::kInt64List) wrong_kind(wanted_[kIds], "ids", "an int64_list");
  sample.ids.assign(ids.int64_values.begin(), ids.int64_values.end());

  const NamedFeature& values = wanted_[kValues];
  if (!values.found) {
    sample.values.assign(sample.ids.size(), 1.0f);  // one-hot features: every value 1
    return;
  }
  if (values.feature.kind != FeatureKind::kFloatList)
    wrong_kind(values, "values", "a float_list, one value per id");
  if (values.feature.float_values.size() != sample.ids.size())
    throw InputError("tf.train.Example feature " + printable(values.key) + " (the values) holds " +
                     std::to_string(values.feature.float_values.size()) + " values, " +
                     printable(wanted_[kIds].key) + " holds " + std::to_string(sample.ids.size()) +
                     " ids; expected one value per id");
  sample.values.assign(values.feature.float_values.begin(), values.feature.float_values.end());
}

CtrReadStats read_ctr_tfrecord(const std::string& path, const CtrReadOptions& options,
                               CtrRecords& out) {
  start_ctr_records(options, out);
  TfRecordReader reader(path);
  CtrExampleDecoder decoder(options);
  CtrSample sample;
  CtrReadStats stats;
  std::vector<uint8_t> payload;
  while (true) {
    const int64_t record = reader.records_read();
    if (!reader.next(payload)) break;  // a framing defect throws here, never skipped
    try {
      decoder.decode(payload.data(), payload.size(), sample);
      append_ctr_sample(sample, options, CtrSampleSource::kExample, out, stats);
    } catch (const InputError& e) {
      skip_or_throw(path + ": record " + std::to_string(record) + " (from 0): " + e.what(), options,
                    stats);
    }
  }
  return stats;
}

void encode_ctr_example(const CtrRecords& records, int64_t row, const CtrReadOptions& keys,
                        std::vector<uint8_t>& out) {
  if (row < 0 || row >= records.size())
    throw std::out_of_range("encode_ctr_example: row " + std::to_string(row) + " of " +
                            std::to_string(records.size()));
  const auto fields = static_cast<std::size_t>(records.fields);
  const std::size_t first = static_cast<std::size_t>(row) * fields;
  const float label = records.labels[static_cast<std::size_t>(row)];
  // The sample's order: label, ids, values.
  encode_numeric_example(
      {NumericFeature::float_list(keys.label_key, &label, 1),
       NumericFeature::int64_list(keys.ids_key, records.ids.data() + first, fields),
       NumericFeature::float_list(keys.values_key, records.values.data() + first, fields)},
      out);
}

void write_ctr_tfrecord(const CtrRecords& records, const std::string& path, bool gzip,
                        const CtrReadOptions& keys) {
  TfRecordWriter writer(path, gzip);
  std::vector<uint8_t> example;
  for (int64_t row = 0; row < records.size(); ++row) {
    encode_ctr_example(records, row, keys, example);
    writer.write(example);
  }
  writer.close();
}

}  // namespace sdp
