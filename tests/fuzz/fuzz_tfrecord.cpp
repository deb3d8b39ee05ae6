// Fuzzes the TFRecord readers and the tf.train.Example decoder. Input layout:
//   byte 0: bit 0 set = the rest is one serialized Example, decoded directly (the records of
//           a file are behind CRCs the fuzzer rarely gets right, so the decoder gets its own
//           mode); clear = the rest is a TFRecord file (plain or gzip: the reader tells them
//           apart by content), read in order with each record decoded as an Example. When
//           that succeeds on a plain file, the index scan, the index file and random access
//           must find the same records (a disagreement traps).
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/formats/tf_example.hpp"
#include "data/formats/tfrecord.hpp"
#include "fuzz_input.hpp"

namespace {

void decode_example(const std::vector<uint8_t>& payload) {
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
