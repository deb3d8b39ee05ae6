// `sdp-train data inspect`: every record read, labels counted, the first defect named by file
// and record, formats told apart by name and framing.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/tools/inspect.hpp"
#include "data/formats/tar_shards.hpp"
#include "data/formats/tf_example.hpp"
#include "data/formats/tfrecord.hpp"
#include "unit/data/expect_input_error.hpp"
#include "unit/data/temp_dir.hpp"

namespace sdp {
namespace {

using sdp::testing::expect_input_error;
using sdp::testing::TempDir;

std::vector<uint8_t> image_bytes(std::size_t n, uint8_t seed) {
  std::vector<uint8_t> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(seed + i * 7);
  return out;
}

// A shard of `labels.size()` Examples; record i has an image of 100 + i bytes.
void write_tfrecord_shard(const std::string& path, const std::vector<int64_t>& labels) {
  TfRecordWriter writer(path);
  for (std::size_t i = 0; i < labels.size(); ++i)
    writer.write(encode_example(image_bytes(100 + i, static_cast<uint8_t>(i)), labels[i], "image/encoded",
                                "image/class/label"));
  writer.close();
}

std::vector<uint8_t> text(const std::string& s) { return {s.begin(), s.end()}; }

TEST(DataInspect, CountsRecordsAndLabelsAcrossTfRecordShards) {
  TempDir dir;
  write_tfrecord_shard(dir.file("train-00000-of-00002"), {1, 2, 2});
  write_tfrecord_shard(dir.file("train-00001-of-00002"), {3, 1});
  tfrecord_index(dir.file("train-00000-of-00002"));  // an index file beside a shard is not data
  const DataInspection r = inspect_data(dir.str(), {});
  EXPECT_EQ(r.format, "tfrecord");
  EXPECT_EQ(r.files.size(), 2u);
  EXPECT_EQ(r.records, 5);
  EXPECT_EQ(r.labels, (std::map<int64_t, int64_t>{{1, 2}, {2, 2}, {3, 1}}));
  EXPECT_EQ(r.image_bytes_min, 100);
  EXPECT_EQ(r.image_bytes_max, 102);
  EXPECT_TRUE(r.complete);
  EXPECT_TRUE(r.bad_message.empty()) << r.bad_message;
  const std::string report = format_inspection(r);
  EXPECT_NE(report.find("records       5"), std::string::npos) << report;
  EXPECT_NE(report.find("3 distinct, 1 .. 3"), std::string::npos) << report;
  EXPECT_NE(report.find("first bad     none"), std::string::npos) << report;
}

TEST(DataInspect, NamesTheFirstBadRecordAndStops) {
  TempDir dir;
  const std::string path = dir.file("shard.tfrecord");
  write_tfrecord_shard(path, {0, 1, 2, 3});
  // Flip one payload byte of record 2 (12 header bytes past its offset).
  std::vector<int64_t> offsets = tfrecord_index(path);
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offsets[2] + 12 + 5);
  f.put('\x55');
  f.close();
  const DataInspection r = inspect_data(path, {});
  EXPECT_EQ(r.records, 2);
  EXPECT_EQ(r.bad_file, path);
  EXPECT_EQ(r.bad_record, 2);
  EXPECT_NE(r.bad_message.find("bad payload checksum"), std::string::npos) << r.bad_message;
}

TEST(DataInspect, AWrongLabelKeyIsADefectOfTheFirstRecord) {
  TempDir dir;
  const std::string path = dir.file("shard");
  write_tfrecord_shard(path, {4});
  InspectOptions options;
  options.label_key = "label";
  const DataInspection r = inspect_data(path, options);
  EXPECT_EQ(r.bad_record, 0);
  EXPECT_NE(r.bad_message.find("label"), std::string::npos) << r.bad_message;
  EXPECT_NE(r.bad_message.find("image/class/label"), std::string::npos) << "the keys it has: " << r.bad_message;
}

TEST(DataInspect, ReadsTarShardsWithTextLabels) {
  TempDir dir;
  const std::string path = dir.file("train-000.tar");
  TarWriter tar(path);
  tar.add_file("a/0001.jpg", image_bytes(50, 1));
  tar.add_file("a/0001.cls", text("7\n"));
  tar.add_file("a/0002.jpg", image_bytes(60, 2));
  tar.add_file("a/0002.cls", text("3"));
  tar.add_file("a/0003.jpg", image_bytes(70, 3));
  tar.add_file("a/0003.cls", text("three"));
  tar.close();
  const DataInspection r = inspect_data(path, {});
  EXPECT_EQ(r.format, "tar-shards");
  EXPECT_EQ(r.records, 2);
  EXPECT_EQ(r.labels, (std::map<int64_t, int64_t>{{3, 1}, {7, 1}}));
  EXPECT_EQ(r.members.at("jpg"), 3);
  EXPECT_EQ(r.bad_record, 2);
  EXPECT_NE(r.bad_message.find("train-000.tar: record 2 (from 0): the label member holds 'three'"), std::string::npos)
      << r.bad_message;
}

TEST(DataInspect, MaxRecordsStopsEarlyWithoutADefect) {
  TempDir dir;
  write_tfrecord_shard(dir.file("s"), {0, 1, 2, 3, 4});
  InspectOptions options;
  options.max_records = 3;
  const DataInspection r = inspect_data(dir.file("s"), options);
  EXPECT_EQ(r.records, 3);
  EXPECT_FALSE(r.complete);
  EXPECT_TRUE(r.bad_message.empty());
}

TEST(DataInspect, RejectsWhatIsNotData) {
  TempDir dir;
  expect_input_error([&] { inspect_data(dir.file("missing"), {}); }, {"missing", "does not exist"});
  expect_input_error([&] { inspect_data(dir.str(), {}); }, {dir.str(), "no data file"});
  std::ofstream(dir.file("notes.txt")) << "not a record file";
  expect_input_error([&] { inspect_data(dir.file("notes.txt"), {}); }, {"notes.txt", "--format"});
  InspectOptions options;
  options.format = "csv";
  expect_input_error([&] { inspect_data(dir.file("notes.txt"), options); }, {"csv"});
}

}  // namespace
}  // namespace sdp
