// `sdp-train data inspect`: every record read, labels counted, the first defect named by file
// and record, formats told apart by name and framing.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/formats/ctr_tfrecord.hpp"
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

// A LibSVM file, told by its text (plain or gzip): what model.fields and model.table_rows
// need, and how the ids and labels are spread.
TEST(DataInspect, SumsUpLibsvmFiles) {
  TempDir dir;
  const std::string lines =
      "1 1:1 2:1 3:1\n"
      "-1 1:1 7:1\n"
      "0 1:1 2:0.5\n"
      "# a comment\n"
      "+1 1:1 2:1 3:1\n";
  testing::write_raw(dir.file("train.libsvm"), text(lines));
  testing::write_gz(dir.file("train.libsvm.gz"), text(lines));
  for (const char* name : {"train.libsvm", "train.libsvm.gz"}) {
    const DataInspection r = inspect_data(dir.file(name), {});
    EXPECT_EQ(r.format, "libsvm") << name;
    EXPECT_EQ(r.records, 4);
    EXPECT_EQ(r.ctr.fields, 3);
    EXPECT_EQ(r.ctr.padded, 2);
    EXPECT_EQ(r.ctr.min_id, 1);
    EXPECT_EQ(r.ctr.max_id, 7);
    EXPECT_EQ(r.ctr.distinct_ids, 4);
    EXPECT_EQ(r.ctr.id_occurrences, 10);
    EXPECT_DOUBLE_EQ(r.ctr.top10_share, 1.0);
    EXPECT_EQ(r.labels, (std::map<int64_t, int64_t>{{0, 2}, {1, 2}}));
    EXPECT_TRUE(r.bad_message.empty()) << r.bad_message;
    const std::string report = format_inspection(r);
    for (const char* line : {"format        libsvm", "fields        3 (the longest row", "padded rows   2",
                             "ids           1 .. 7, 4 distinct (model.table_rows >= 8", "top-10 ids    100.0% of 10",
                             "labels        2 of 0, 2 of 1 (50.0% positive)", "first bad     none"})
      EXPECT_NE(report.find(line), std::string::npos) << line << " not in:\n" << report;
  }
}

TEST(DataInspect, TopTenShareOfManyIds) {
  TempDir dir;
  std::string lines;
  // Id 0 in every row, ids 1..10 in every other row, and 1000 ids once each.
  for (int i = 0; i < 1000; ++i)
    lines += "1 0:1 " + (i % 2 ? std::string() : std::to_string(1 + i % 20 / 2) + ":1 ") + std::to_string(100 + i) + ":1\n";
  testing::write_raw(dir.file("skewed"), text(lines));
  const DataInspection r = inspect_data(dir.file("skewed"), {});
  EXPECT_EQ(r.ctr.distinct_ids, 1 + 10 + 1000);
  EXPECT_EQ(r.ctr.id_occurrences, 1000 + 500 + 1000);
  // The ten most frequent: id 0 (1000), then nine of ids 1..10 (50 each).
  EXPECT_DOUBLE_EQ(r.ctr.top10_share, (1000.0 + 9 * 50) / 2500);
  EXPECT_EQ(r.ctr.padded, 500);
}

TEST(DataInspect, NamesTheFirstBadLibsvmLine) {
  TempDir dir;
  const std::string path = dir.file("bad.libsvm");
  testing::write_raw(path, text("1 1:1\n0 2:1\n1 3:inf\n1 4:1\n"));
  const DataInspection r = inspect_data(path, {});
  EXPECT_EQ(r.records, 2);
  EXPECT_EQ(r.bad_record, 2);
  EXPECT_EQ(r.bad_message.find(path + ":3: field 0 (the 1st pair): value inf of id 3 is not finite"), 0u)
      << r.bad_message;
}

// TFRecord files of label, ids, values: told from image Examples by their ids feature.
TEST(DataInspect, SumsUpCtrTfRecordFiles) {
  TempDir dir;
  CtrRecords records;
  records.fields = 2;
  records.ids = {5, 6, 5, 0};
  records.values = {1, 1, 1, 0};
  records.labels = {1, 0};
  write_ctr_tfrecord(records, dir.file("a.tfrecord"));
  write_ctr_tfrecord(records, dir.file("b.tfrecord"), /*gzip=*/true);
  const DataInspection r = inspect_data(dir.str(), {});
  EXPECT_EQ(r.format, "ctr-tfrecord");
  EXPECT_EQ(r.records, 4);
  EXPECT_EQ(r.ctr.fields, 2);
  EXPECT_EQ(r.ctr.padded, 2);  // the files hold their padding (id 0, value 0): not counted as ids
  EXPECT_EQ(r.ctr.min_id, 5);
  EXPECT_EQ(r.ctr.distinct_ids, 2);
  EXPECT_EQ(r.ctr.id_occurrences, 6);
  EXPECT_EQ(r.labels, (std::map<int64_t, int64_t>{{0, 2}, {1, 2}}));

  InspectOptions wrong;
  wrong.format = "ctr-tfrecord";
  wrong.ids_key = "feat_ids";
  const DataInspection bad = inspect_data(dir.file("a.tfrecord"), wrong);
  EXPECT_EQ(bad.bad_record, 0);
  EXPECT_NE(bad.bad_message.find("record 0 (from 0): tf.train.Example has no feature 'feat_ids'"), std::string::npos)
      << bad.bad_message;
}

}  // namespace
}  // namespace sdp
