// Fuzzes the TFRecord readers and the tf.train.Example decoder. Input layout:
//   byte 0: bit 0 set = the rest is one serialized Example, decoded directly (the records of
//           a file are behind CRCs the fuzzer rarely gets right, so the decoder gets its own
//           mode); clear = the rest is a TFRecord file (plain or gzip: the reader tells them
//           apart by content), read in order with each record decoded as an Example. When
//           that succeeds on a plain file, the index scan, the index file and random access
//           must find the same records (a disagreement traps).
// Every Example is also decoded as a CTR sample (data/formats/ctr_tfrecord.hpp): the features
// parse_named_features finds must be those parse_example_features finds, and a sample that
// decodes must be whole (as many values as ids, a 0/1 label). In file mode the file is also read
// by read_ctr_tfrecord, whose records must fit its options.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/formats/ctr_tfrecord.hpp"
#include "data/formats/tf_example.hpp"
#include "data/formats/tfrecord.hpp"
#include "fuzz_input.hpp"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

bool same_feature(const sdp::Feature& a, const sdp::Feature& b) {
  if (a.kind != b.kind || a.int64_values != b.int64_values ||
      a.bytes_values.size() != b.bytes_values.size() ||
      a.float_values.size() != b.float_values.size())
    return false;
  for (std::size_t i = 0; i < a.bytes_values.size(); ++i)  // views of the same bytes
    if (a.bytes_values[i].data != b.bytes_values[i].data ||
        a.bytes_values[i].size != b.bytes_values[i].size)
      return false;
  for (std::size_t i = 0; i < a.float_values.size(); ++i)  // NaN payloads compare by bits
    if (std::memcmp(&a.float_values[i], &b.float_values[i], sizeof(float)) != 0) return false;
  return true;
}

// The CTR decoding of an Example, checked against the full decoder when that one succeeds.
void decode_ctr_example(const std::vector<uint8_t>& payload) {
  const sdp::CtrReadOptions keys;
  std::vector<sdp::NamedFeature> wanted(3);
  wanted[0].key = keys.label_key;
  wanted[1].key = keys.ids_key;
  wanted[2].key = keys.values_key;
  std::map<std::string, sdp::Feature> all;
  bool all_parsed = false;
  try {
    all = sdp::parse_example_features(payload.data(), payload.size());
    all_parsed = true;
  } catch (const sdp::InputError&) {
  }
  try {
    sdp::parse_named_features(payload.data(), payload.size(), wanted);
    if (all_parsed)
      for (const sdp::NamedFeature& w : wanted) {
        const auto it = all.find(w.key);
        check(w.found == (it != all.end()));
        if (w.found) check(same_feature(w.feature, it->second));
      }
  } catch (const sdp::InputError&) {
    check(!all_parsed);  // it decodes a subset: it cannot fail where the full decoder did not
  }
  try {
    sdp::CtrSample sample;
    sdp::CtrExampleDecoder(keys).decode(payload.data(), payload.size(), sample);
    check(sample.ids.size() == sample.values.size());
    check(sample.label == 0.0f || sample.label == 1.0f);
  } catch (const sdp::InputError&) {
  }
}

void decode_example(const std::vector<uint8_t>& payload) {
  decode_ctr_example(payload);
  try {
    const auto features = sdp::parse_example_features(payload.data(), payload.size());
    for (const auto& [key, feature] : features)
      for (const sdp::ByteView& v : feature.bytes_values)
        if (v.data < payload.data() || v.data + v.size > payload.data() + payload.size())
          __builtin_trap();  // a view outside the record
    sdp::parse_example(payload.data(), payload.size(), "image/encoded", "image/class/label");
  } catch (const sdp::InputError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] & 1) {
    decode_example(std::vector<uint8_t>(data + 1, data + size));
    return 0;
  }
  const std::string path = sdp::fuzz::write_file("data.tfrecord", data + 1, size - 1);
  // The index of the previous input would be believed if the file times were equal.
  std::remove(sdp::tfrecord_index_path(path).c_str());
  std::vector<std::vector<uint8_t>> records;
  bool plain = false;
  try {
    sdp::TfRecordReader reader(path);
    plain = !reader.gzip();
    std::vector<uint8_t> payload;
    while (reader.next(payload)) {
      decode_example(payload);
      records.push_back(payload);
    }
  } catch (const sdp::InputError&) {
    return 0;
  }
  try {
    sdp::CtrReadOptions options;
    options.fields = 4;
    options.table_rows = 100;
    options.skip_bad = true;
    options.id_overflow = sdp::IdOverflow::kHash;
    sdp::CtrRecords ctr;
    const sdp::CtrReadStats stats = sdp::read_ctr_tfrecord(path, options, ctr);
    check(ctr.fields == 4 && stats.samples == ctr.size() &&
          stats.samples + stats.skipped == static_cast<int64_t>(records.size()));
    check(ctr.ids.size() == static_cast<std::size_t>(ctr.size()) * 4 &&
          ctr.values.size() == ctr.ids.size());
    for (int64_t id : ctr.ids) check(id >= 0 && id < 100);
  } catch (const sdp::InputError&) {
    __builtin_trap();  // the framing read above; with skip_bad every bad record is skipped
  }
  if (!plain) return 0;
  try {
    const sdp::TfRecordFile file(path);   // scans, writes the index
    const sdp::TfRecordFile again(path);  // may load the index just written
    if (file.size() != static_cast<int64_t>(records.size()) || again.offsets() != file.offsets())
      __builtin_trap();
    std::vector<uint8_t> payload;
    for (int64_t i = file.size() - 1; i >= 0; --i) {
      file.read(i, payload);
      if (payload != records[static_cast<size_t>(i)]) __builtin_trap();
    }
  } catch (const sdp::InputError&) {
    __builtin_trap();  // the sequential reader accepted the file: random access must too
  }
  return 0;
}
