// Fuzzes the LibSVM reader of CTR samples. Input layout:
//   byte 0: bit 0 = options.skip_bad; bit 1 = IdOverflow::kHash (clear: kError);
//           bits 2-4 = fields - 1 (1 to 8)
//   byte 1: table_rows - 1 (1 to 256, small, so that ids overflow it)
//   the rest: the file (plain, or gzip when it starts with the gzip magic bytes).
// Whatever the file holds, a read that succeeds must give records a model can take (every id
// in [0, table_rows), `fields` finite pairs a sample, labels 0 or 1) and stats that agree with
// them, and those records must come back identical through write_ctr_tfrecord and
// read_ctr_tfrecord. The streamed reader (data.load: stream) must agree with the whole-file
// reader: the same rows when that succeeds, an InputError when it fails. A violation traps.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/formats/ctr_records.hpp"
#include "data/formats/ctr_tfrecord.hpp"
#include "data/formats/libsvm.hpp"
#include "data/sets/stream_source.hpp"
#include "fuzz_input.hpp"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void check_records(const sdp::CtrRecords& r, const sdp::CtrReadOptions& options,
                   const sdp::CtrReadStats& stats) {
  const auto rows = static_cast<std::size_t>(r.size());
  const auto cells = rows * static_cast<std::size_t>(options.fields);
  check(r.fields == options.fields);
  check(r.ids.size() == cells && r.values.size() == cells);
  check(stats.samples == r.size());
  check(stats.padded >= 0 && stats.padded <= stats.samples);
  check(stats.hashed_ids >= 0 &&
        (options.id_overflow == sdp::IdOverflow::kHash || stats.hashed_ids == 0));
  check(options.skip_bad || stats.skipped == 0);
  check((stats.skipped == 0) == stats.first_skipped.empty());
  int64_t max_id = -1;
  for (std::size_t i = 0; i < cells; ++i) {
    check(r.ids[i] >= 0 && r.ids[i] < options.table_rows);
    check(std::isfinite(r.values[i]));
    max_id = std::max(max_id, r.ids[i]);
  }
  // An id is stored as read or hashed below the table (below the id), padding is 0: no stored
  // id exceeds the largest read.
  check(max_id <= std::max(stats.max_id, int64_t{0}));
  for (float label : r.labels) check(label == 0.0f || label == 1.0f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  sdp::CtrReadOptions options;
  options.skip_bad = (data[0] & 1) != 0;
  options.id_overflow = (data[0] & 2) != 0 ? sdp::IdOverflow::kHash : sdp::IdOverflow::kError;
  options.fields = 1 + ((data[0] >> 2) & 7);
  options.table_rows = 1 + int64_t{data[1]};
  const std::string path = sdp::fuzz::write_file("data.libsvm", data + 2, size - 2);

  // The streamed reader's rows (empty with `streamed_ok` false when it threw InputError).
  sdp::CtrRecords streamed;
  streamed.fields = options.fields;
  bool streamed_ok = true;
  try {
    sdp::StreamSourceOptions stream;
    stream.format = sdp::StreamFormat::kLibsvm;
    stream.ctr = options;
    sdp::EncodedRecord record;
    std::vector<int64_t> ids(static_cast<std::size_t>(options.fields));
    std::vector<float> values(ids.size());
    for (auto reader = sdp::open_stream_shard(path, 0, stream); reader->next(record);) {
      sdp::unpack_ctr_row(record.image, options.fields, ids.data(), values.data());
      streamed.ids.insert(streamed.ids.end(), ids.begin(), ids.end());
      streamed.values.insert(streamed.values.end(), values.begin(), values.end());
      streamed.labels.push_back(static_cast<float>(record.label));
    }
  } catch (const sdp::InputError&) {
    streamed_ok = false;
  }

  sdp::CtrRecords records;
  sdp::CtrReadStats stats;
  try {
    stats = sdp::read_libsvm(path, options, records);
  } catch (const sdp::InputError&) {
    check(!streamed_ok);
    return 0;
  }
  check_records(records, options, stats);
  check(streamed_ok && streamed.labels == records.labels && streamed.ids == records.ids);
  for (std::size_t i = 0; i < records.values.size(); ++i)
    check(std::signbit(streamed.values[i]) == std::signbit(records.values[i]) &&
          streamed.values[i] == records.values[i]);

  // The same records through the TFRecord layout: ids are in the table now, so nothing hashes.
  const std::string tfrecord = sdp::fuzz::scratch_dir() + "/data.tfrecord";
  sdp::write_ctr_tfrecord(records, tfrecord, /*gzip=*/(data[0] & 0x20) != 0);
  sdp::CtrRecords back;
  sdp::CtrReadOptions strict = options;
  strict.skip_bad = false;
  strict.id_overflow = sdp::IdOverflow::kError;
  try {
    const sdp::CtrReadStats back_stats = sdp::read_ctr_tfrecord(tfrecord, strict, back);
    check(back_stats.samples == records.size() && back_stats.padded == 0);
  } catch (const sdp::InputError&) {
    __builtin_trap();  // our own file of good records must read
  }
  check(back.fields == records.fields && back.labels == records.labels && back.ids == records.ids);
  for (std::size_t i = 0; i < back.values.size(); ++i)  // bitwise: -0 stays -0
    check(std::signbit(back.values[i]) == std::signbit(records.values[i]) &&
          back.values[i] == records.values[i]);
  return 0;
}
