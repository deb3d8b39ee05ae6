#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/formats/tfrecord.hpp"
#include "expect_input_error.hpp"
#include "temp_dir.hpp"

namespace sdp {
namespace {

using Bytes = std::vector<uint8_t>;
using testing::expect_input_error;
using testing::TempDir;
namespace fs = std::filesystem;

// Independent of lib/core/crc32c: bit-at-a-time CRC-32C and TFRecord's mask as the spec
// (tensorflow/core/lib/hash/crc32c.h) writes them.
uint32_t reference_crc32c(const uint8_t* p, std::size_t n) {
  uint32_t crc = 0xffffffffu;
  for (std::size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}
uint32_t reference_mask(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
void put_le(Bytes& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// One record framed by hand from the spec; `claimed_length` lets a test lie about the size.
Bytes frame(const Bytes& payload, uint64_t claimed_length) {
  Bytes out;
  put_le(out, claimed_length, 8);
  put_le(out, reference_mask(reference_crc32c(out.data(), 8)), 4);
  out.insert(out.end(), payload.begin(), payload.end());
  put_le(out, reference_mask(reference_crc32c(payload.data(), payload.size())), 4);
  return out;
}
Bytes frame(const Bytes& payload) {
  return frame(payload, payload.size());
}

Bytes pattern(std::size_t n, int seed) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((i * 31 + seed * 7) % 251);
  return b;
}

std::vector<Bytes> read_all_records(const std::string& path) {
  TfRecordReader reader(path);
  std::vector<Bytes> records;
  Bytes payload;
  while (reader.next(payload)) records.push_back(payload);
  EXPECT_EQ(reader.records_read(), static_cast<int64_t>(records.size()));
  EXPECT_FALSE(reader.next(payload));  // the end stays the end
  return records;
}

// The payloads most tests use: empty, tiny, and one spanning several read chunks of zlib.
std::vector<Bytes> sample_payloads() {
  return {pattern(10, 1), Bytes{}, pattern(1, 2), pattern(300000, 3), pattern(77, 4)};
}

void write_records(const std::string& path, const std::vector<Bytes>& payloads, bool gzip) {
  TfRecordWriter writer(path, gzip);
  for (const Bytes& p : payloads) writer.write(p);
  EXPECT_EQ(writer.records_written(), static_cast<int64_t>(payloads.size()));
  writer.close();
}

TEST(TfRecord, GoldenBytesOfOneRecord) {
  // Payload "abc": length 3 as 8 little-endian bytes; masked crc32c of those bytes
  // (crc32c = 0x576c35e3, masked 0x0e4999b0); "abc"; masked crc32c("abc") (crc32c =
  // 0x364b3fb7, masked 0x21f1576e). The CRCs are written out here, not computed.
  const Bytes golden = {0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xb0, 0x99,
                        0x49, 0x0e, 0x61, 0x62, 0x63, 0x6e, 0x57, 0xf1, 0x21};
  EXPECT_EQ(frame({'a', 'b', 'c'}), golden);  // the test's own framing agrees with the constants
  TempDir dir;
  write_records(dir.file("abc.tfrecord"), {{'a', 'b', 'c'}}, /*gzip=*/false);
  EXPECT_EQ(testing::read_raw(dir.file("abc.tfrecord")), golden);
  testing::write_raw(dir.file("golden.tfrecord"), golden);
  EXPECT_EQ(read_all_records(dir.file("golden.tfrecord")), (std::vector<Bytes>{{'a', 'b', 'c'}}));
}

TEST(TfRecord, RoundTripPlainAndGzip) {
  TempDir dir;
  for (bool gzip : {false, true}) {
    const std::string path = dir.file(gzip ? "data.tfrecord.gz" : "data.tfrecord");
    write_records(path, sample_payloads(), gzip);
    const Bytes raw = testing::read_raw(path);
    ASSERT_GE(raw.size(), 2u);
    EXPECT_EQ(raw[0] == 0x1f && raw[1] == 0x8b, gzip) << "gzip magic iff gzip";
    EXPECT_EQ(tfrecord_is_gzip(path), gzip);
    EXPECT_EQ(read_all_records(path), sample_payloads()) << path;
  }
  // An empty file is a file of no records.
  testing::write_raw(dir.file("empty.tfrecord"), {});
  EXPECT_TRUE(read_all_records(dir.file("empty.tfrecord")).empty());
  // A gzip file by another writer (zlib's gzip framing), whatever its name.
  Bytes plain;
  for (const Bytes& p : sample_payloads()) {
    const Bytes f = frame(p);
    plain.insert(plain.end(), f.begin(), f.end());
  }
  testing::write_gz(dir.file("other-name"), plain);
  EXPECT_EQ(read_all_records(dir.file("other-name")), sample_payloads());
}

// A plain file whose first record is 0x8b1f bytes long starts with the gzip magic bytes
// 1f 8b: zlib's gzread would take it for gzip and fail. It must read as the plain file it is.
TEST(TfRecord, FlushedRecordsReadBackWhileTheWriterIsOpen) {
  // What a process that dies after flush() leaves in a plain file: every record so far, whole.
  TempDir dir;
  const std::string path = dir.file("open.tfrecord");
  TfRecordWriter writer(path);
  writer.write(pattern(10, 1));
  writer.write(pattern(300, 2));
  writer.flush();
  EXPECT_EQ(read_all_records(path), (std::vector<Bytes>{pattern(10, 1), pattern(300, 2)}));
  writer.write(pattern(5, 3));
  writer.close();
  EXPECT_EQ(read_all_records(path), (std::vector<Bytes>{pattern(10, 1), pattern(300, 2), pattern(5, 3)}));
  EXPECT_THROW(writer.flush(), std::logic_error);
  // A gzip file may be flushed mid-stream and still ends as a valid stream at close.
  const std::string gz = dir.file("open.tfrecord.gz");
  TfRecordWriter gz_writer(gz, /*gzip=*/true);
  gz_writer.write(pattern(10, 1));
  gz_writer.flush();
  gz_writer.write(pattern(20, 2));
  gz_writer.close();
  EXPECT_EQ(read_all_records(gz), (std::vector<Bytes>{pattern(10, 1), pattern(20, 2)}));
}

TEST(TfRecord, PlainFileStartingWithGzipMagic) {
  TempDir dir;
  const std::string path = dir.file("magic.tfrecord");
  const std::vector<Bytes> payloads = {pattern(0x8b1f, 5), pattern(3, 6)};
  write_records(path, payloads, false);
  const Bytes raw = testing::read_raw(path);
  ASSERT_EQ(raw[0], 0x1f);
  ASSERT_EQ(raw[1], 0x8b);
  EXPECT_FALSE(tfrecord_is_gzip(path));
  EXPECT_EQ(read_all_records(path), payloads);
  EXPECT_EQ(scan_tfrecord_offsets(path), (std::vector<int64_t>{0, 16 + 0x8b1f}));
}

// Two good records (10 and 3 bytes: offsets 0 and 26), then `tail`.
Bytes two_records_then(const Bytes& tail) {
  Bytes data = frame(pattern(10, 1));
  const Bytes second = frame(pattern(3, 2));
  data.insert(data.end(), second.begin(), second.end());
  data.insert(data.end(), tail.begin(), tail.end());
  return data;
}

// Reads everything in `bytes`, written plain or gzip, and expects an error naming the
// file, record 2 at offset 45 (after the two good records), and `what`.
void expect_third_record_error(const Bytes& bytes, bool gzip, const std::string& what) {
  TempDir dir;
  const std::string path = dir.file(gzip ? "bad.tfrecord.gz" : "bad.tfrecord");
  (gzip ? testing::write_gz : testing::write_raw)(path, bytes);
  TfRecordReader reader(path);
  Bytes payload;
  ASSERT_TRUE(reader.next(payload));
  ASSERT_TRUE(reader.next(payload));
  expect_input_error([&] { reader.next(payload); },
                     {path, "record 2 (from 0) at byte offset 45", what});
  EXPECT_TRUE(payload.empty());
}

TEST(TfRecord, TruncatedHeaderPayloadAndChecksum) {
  const Bytes third = frame(pattern(20, 3));  // 12 header + 20 payload + 4 checksum
  for (bool gzip : {false, true}) {
    SCOPED_TRACE(gzip ? "gzip" : "plain");
    expect_third_record_error(two_records_then(Bytes(third.begin(), third.begin() + 5)), gzip,
                              "truncated record header: expected 12 bytes, the file ends after 5");
    expect_third_record_error(two_records_then(Bytes(third.begin(), third.begin() + 12 + 7)), gzip,
                              "truncated");
    expect_third_record_error(two_records_then(Bytes(third.begin(), third.end() - 2)), gzip,
                              "truncated");
  }
  // Gzip has no file size to compare with: the payload and the checksum run out as they are read.
  expect_third_record_error(two_records_then(Bytes(third.begin(), third.begin() + 12 + 7)), true,
                            "truncated payload: expected 20 bytes, the file ends after 7");
  expect_third_record_error(two_records_then(Bytes(third.begin(), third.end() - 2)), true,
                            "truncated payload checksum: expected 4 bytes, the file ends after 2");
  // A plain file knows its size: the header's claim is checked before anything is read.
  expect_third_record_error(
      two_records_then(Bytes(third.begin(), third.begin() + 12 + 7)), false,
      "the header claims 20 bytes of payload and 4 of checksum, the file has 7");
}

TEST(TfRecord, BadChecksums) {
  for (bool gzip : {false, true}) {
    SCOPED_TRACE(gzip ? "gzip" : "plain");
    Bytes length_flipped = frame(pattern(20, 3));
    length_flipped[0] ^= 0x01;
    expect_third_record_error(two_records_then(length_flipped), gzip, "bad length checksum");
    Bytes crc_flipped = frame(pattern(20, 3));
    crc_flipped[9] ^= 0x10;
    expect_third_record_error(two_records_then(crc_flipped), gzip, "bad length checksum");
    Bytes payload_flipped = frame(pattern(20, 3));
    payload_flipped[12 + 19] ^= 0x80;
    expect_third_record_error(two_records_then(payload_flipped), gzip, "bad payload checksum");
    Bytes footer_flipped = frame(pattern(20, 3));
    footer_flipped.back() ^= 0x01;
    expect_third_record_error(two_records_then(footer_flipped), gzip, "bad payload checksum");
  }
}

TEST(TfRecord, AbsurdLengthsAllocateNothing) {
  for (bool gzip : {false, true}) {
    SCOPED_TRACE(gzip ? "gzip" : "plain");
    // 2^40 bytes, with a correct length CRC: over the 1 GiB limit before any allocation.
    expect_third_record_error(two_records_then(frame(pattern(4, 1), uint64_t{1} << 40)), gzip,
                              "record length 1099511627776 is over the limit of 1073741824 bytes");
    expect_third_record_error(two_records_then(frame(pattern(4, 1), ~uint64_t{0})), gzip,
                              "over the limit");
  }
  // 512 MiB claimed by a tiny file: a plain file says so from its size; gzip reads what is
  // there (the payload grows in 16 MiB steps) and reports the truncation.
  const Bytes big_claim = two_records_then(frame(pattern(4, 1), uint64_t{512} << 20));
  expect_third_record_error(big_claim, false, "the header claims 536870912 bytes of payload");
  expect_third_record_error(big_claim, true,
                            "truncated payload: expected 536870912 bytes, the file ends after 8");
}

TEST(TfRecord, NotATfRecordFile) {
  TempDir dir;
  testing::write_raw(dir.file("text.txt"), Bytes(40, 'x'));
  expect_input_error([&] { read_all_records(dir.file("text.txt")); },
                     {dir.file("text.txt"), "record 0 (from 0) at byte offset 0",
                      "bad length checksum", "not a TFRecord file"});
  expect_input_error([&] { TfRecordReader reader(dir.file("missing")); },
                     {dir.file("missing"), "no such file"});
  // Gzip magic and then garbage: zlib's error, with the file and the record.
  testing::write_raw(dir.file("broken.gz"),
                     {0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff, 0xff, 0xff});
  expect_input_error([&] { read_all_records(dir.file("broken.gz")); },
                     {dir.file("broken.gz"), "gzip", "record 0"});
}

std::vector<int64_t> expected_offsets(const std::vector<Bytes>& payloads) {
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  for (const Bytes& p : payloads) {
    offsets.push_back(offset);
    offset += 16 + static_cast<int64_t>(p.size());
  }
  return offsets;
}

TEST(TfRecordIndex, ScanAndRandomAccess) {
  TempDir dir;
  const std::string path = dir.file("data.tfrecord");
  const std::vector<Bytes> payloads = sample_payloads();
  write_records(path, payloads, false);
  EXPECT_EQ(scan_tfrecord_offsets(path), expected_offsets(payloads));

  TfRecordFile file(path);
  ASSERT_EQ(file.size(), 5);
  EXPECT_EQ(file.offsets(), expected_offsets(payloads));
  Bytes payload;
  for (int64_t r : {3, 0, 4, 1, 2, 3}) {
    file.read(r, payload);
    EXPECT_EQ(payload, payloads[r]) << "record " << r;
  }
  file.read_record_at(file.offsets()[4], payload);
  EXPECT_EQ(payload, payloads[4]);
  // An offset that is not a record's start fails the length checksum.
  expect_input_error([&] { file.read_record_at(1, payload); },
                     {path, "record at byte offset 1", "bad length checksum"});
  expect_input_error([&] { file.read_record_at(1 << 30, payload); },
                     {path, "byte offset 1073741824", "outside the file"});
  EXPECT_THROW(file.read(5, payload), std::out_of_range);
}

TEST(TfRecordIndex, RandomAccessChecksThePayload) {
  TempDir dir;
  const std::string path = dir.file("data.tfrecord");
  Bytes data = frame(pattern(10, 1));
  Bytes second = frame(pattern(30, 2));
  second[12 + 5] ^= 0x04;  // only the payload's CRC can tell
  data.insert(data.end(), second.begin(), second.end());
  testing::write_raw(path, data);
  TfRecordFile file(path);  // the index reads headers only
  ASSERT_EQ(file.size(), 2);
  Bytes payload;
  file.read(0, payload);
  expect_input_error([&] { file.read(1, payload); },
                     {path, "record 1 (from 0) at byte offset 26", "bad payload checksum"});
}

TEST(TfRecordIndex, ScanReportsDefects) {
  TempDir dir;
  const std::string path = dir.file("bad.tfrecord");
  Bytes tail = frame(pattern(20, 3));
  tail.resize(tail.size() - 1);
  testing::write_raw(path, two_records_then(tail));
  expect_input_error([&] { scan_tfrecord_offsets(path); },
                     {path, "record 2 (from 0) at byte offset 45", "truncated"});
  expect_input_error([&] { TfRecordFile file(path); }, {path, "record 2", "truncated"});
  EXPECT_FALSE(fs::exists(tfrecord_index_path(path))) << "no index of a bad file";
  Bytes flipped = frame(pattern(20, 3));
  flipped[2] ^= 1;
  testing::write_raw(path, two_records_then(flipped));
  expect_input_error([&] { scan_tfrecord_offsets(path); },
                     {path, "record 2 (from 0) at byte offset 45", "bad length checksum"});
  testing::write_raw(path, two_records_then({1, 2, 3}));
  expect_input_error([&] { scan_tfrecord_offsets(path); },
                     {path, "record 2", "truncated record header"});
}

TEST(TfRecordIndex, GzipCannotBeIndexed) {
  TempDir dir;
  const std::string path = dir.file("data.tfrecord.gz");
  write_records(path, sample_payloads(), true);
  for (auto call : {+[](const std::string& p) { scan_tfrecord_offsets(p); },
                    +[](const std::string& p) { tfrecord_index(p); },
                    +[](const std::string& p) { write_tfrecord_index(p); },
                    +[](const std::string& p) { TfRecordFile file(p); }})
    expect_input_error([&] { call(path); },
                       {path, "gzip-compressed", "cannot be indexed", "read it in order"});
  EXPECT_FALSE(fs::exists(tfrecord_index_path(path)));
}

// Sets the modification time of `path` to `seconds` after the epoch of the file clock's
// now, so tests order files without sleeping.
void set_mtime(const std::string& path, int seconds_from_now) {
  fs::last_write_time(path,
                      fs::file_time_type::clock::now() + std::chrono::seconds(seconds_from_now));
}

TEST(TfRecordIndex, MadeOnFirstUseThenReused) {
  TempDir dir;
  const std::string path = dir.file("data.tfrecord");
  const std::vector<Bytes> payloads = sample_payloads();
  write_records(path, payloads, false);
  const std::string index = tfrecord_index_path(path);
  EXPECT_EQ(index, path + ".idx");
  ASSERT_FALSE(fs::exists(index));
  EXPECT_EQ(tfrecord_index(path), expected_offsets(payloads));
  ASSERT_TRUE(fs::exists(index)) << "made on first use";
  EXPECT_TRUE(std::none_of(fs::directory_iterator(dir.str()), fs::directory_iterator(),
                           [](const fs::directory_entry& e) {
                             return e.path().string().find(".tmp.") != std::string::npos;
                           }))
      << "no temporary file left behind";

  // Reused: an index that is well formed and records the right size is believed. This one
  // lists only the first two records, which a rescan would not say.
  const int64_t size = static_cast<int64_t>(fs::file_size(path));
  {
    std::ofstream out(index, std::ios::trunc);
    out << "sdp-tfrecord-index 1\ndata_bytes " << size << "\nrecords 2\n0\n26\n";
  }
  set_mtime(path, -10);
  EXPECT_EQ(tfrecord_index(path), (std::vector<int64_t>{0, 26}));
  EXPECT_EQ(TfRecordFile(path).size(), 2);
}

TEST(TfRecordIndex, StaleOrMalformedIndexIsRemade) {
  TempDir dir;
  const std::string path = dir.file("data.tfrecord");
  std::vector<Bytes> payloads = sample_payloads();
  write_records(path, payloads, false);
  const std::string index = tfrecord_index_path(path);
  EXPECT_EQ(write_tfrecord_index(path), expected_offsets(payloads));
  ASSERT_TRUE(fs::exists(index));

  // The data file grew: its size no longer matches the index.
  payloads.push_back(pattern(5, 9));
  write_records(path, payloads, false);
  set_mtime(index, 10);  // newer than the data, yet stale by size
  EXPECT_EQ(tfrecord_index(path), expected_offsets(payloads));
  EXPECT_EQ(tfrecord_index(path), expected_offsets(payloads)) << "and the remade index is right";

  // Same size, different records, written after the index: stale by time.
  // The 6 records take 16 * 6 bytes of framing plus their payloads; 2 records of the same
  // total size carry 16 * 4 bytes more payload.
  int64_t payload_bytes = 0;
  for (const Bytes& p : payloads) payload_bytes += static_cast<int64_t>(p.size());
  const std::vector<Bytes> same_size = {
      pattern(20, 1), pattern(static_cast<std::size_t>(payload_bytes - 20 + 16 * 4), 2)};
  write_records(path, same_size, false);
  ASSERT_EQ(fs::file_size(path), static_cast<uintmax_t>(16 * 6 + payload_bytes));
  set_mtime(index, -20);
  set_mtime(path, -10);
  EXPECT_EQ(tfrecord_index(path), expected_offsets(same_size));

  // Garbage in the index file: rescanned, and the index rewritten.
  testing::write_raw(index, {'n', 'o', 'p', 'e', '\n'});
  set_mtime(index, 10);
  EXPECT_EQ(tfrecord_index(path), expected_offsets(same_size));
  const Bytes rewritten = testing::read_raw(index);
  EXPECT_EQ(std::string(rewritten.begin(), rewritten.begin() + 20), "sdp-tfrecord-index 1");

  // Offsets that cannot belong to the file (past its end, not increasing): rescanned.
  const int64_t size = static_cast<int64_t>(fs::file_size(path));
  for (const std::string& offsets :
       {"0\n" + std::to_string(size) + "\n", std::string("0\n0\n"), std::string("5\n40\n")}) {
    std::ofstream(index, std::ios::trunc)
        << "sdp-tfrecord-index 1\ndata_bytes " << size << "\nrecords 2\n"
        << offsets;
    set_mtime(index, 10);
    EXPECT_EQ(tfrecord_index(path), expected_offsets(same_size)) << offsets;
  }
}

}  // namespace
}  // namespace sdp
