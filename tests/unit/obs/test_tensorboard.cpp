// TensorBoard event files (obs/tensorboard.hpp): the Event protos byte for byte (constants
// worked out by hand from event.proto and summary.proto, not computed by the code under test),
// the file read back through data/'s TfRecordReader with both masked CRCs checked, the file
// complete while the writer is still open (a crash keeps it), and MetricsLog's scalars.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "core/crc32c.hpp"
#include "data/formats/tfrecord.hpp"
#include "obs/metrics.hpp"
#include "obs/tensorboard.hpp"
#include "unit/data/temp_dir.hpp"

namespace sdp {
namespace {

using Bytes = std::vector<uint8_t>;
using testing::TempDir;

Bytes bytes_of(const std::string& text) { return Bytes(text.begin(), text.end()); }

Bytes concat(std::initializer_list<Bytes> parts) {
  Bytes all;
  for (const Bytes& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

std::vector<Bytes> read_records(const std::string& path) {
  TfRecordReader reader(path);  // throws on a bad length or payload CRC
  std::vector<Bytes> records;
  Bytes payload;
  while (reader.next(payload)) records.push_back(payload);
  return records;
}

// The one event file in `dir`.
std::string event_file(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files.push_back(entry.path().string());
  EXPECT_EQ(files.size(), 1u);
  return files.empty() ? "" : files[0];
}

TEST(TensorBoard, FileVersionEventBytes) {
  // Event{wall_time (1, fixed64) = 2.0, file_version (3, bytes) = "brain.Event:2"}.
  const Bytes golden = concat({{0x09, 0, 0, 0, 0, 0, 0, 0x00, 0x40}, {0x1a, 13}, bytes_of("brain.Event:2")});
  EXPECT_EQ(encode_file_version_event(2.0), golden);
}

TEST(TensorBoard, ScalarsEventBytes) {
  // Event{wall_time = 1.5, step (2, varint) = 7, summary (5) = Summary{value (1) =
  // Value{tag (1) = "loss", simple_value (2, fixed32) = 0.25f}}}.
  const Bytes value = concat({{0x0a, 4}, bytes_of("loss"), {0x15, 0x00, 0x00, 0x80, 0x3e}});
  const Bytes summary = concat({{0x0a, static_cast<uint8_t>(value.size())}, value});
  const Bytes golden = concat({{0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f}, {0x10, 7},
                               {0x2a, static_cast<uint8_t>(summary.size())}, summary});
  EXPECT_EQ(encode_scalars_event(1.5, 7, {{"loss", 0.25f}}), golden);
  // A step past 2^7 takes more varint bytes; two values are two Summary.value entries.
  const Bytes two = encode_scalars_event(0.0, 300, {{"a", 1.0f}, {"b", 2.0f}});
  EXPECT_EQ(Bytes(two.begin() + 9, two.begin() + 12), (Bytes{0x10, 0xac, 0x02}));
  EXPECT_EQ(two.size(), 9u + 3u + 2u + 2u * (2u + 3u + 5u));
}

TEST(TensorBoard, FileNameAsTensorFlowWritesIt) {
  EXPECT_EQ(tensorboard_file_name(1700000000, "algo-1"), "events.out.tfevents.1700000000.algo-1");
  EXPECT_EQ(tensorboard_file_name(42, "h"), "events.out.tfevents.0000000042.h");  // %010d
}

TEST(TensorBoard, TagsOfTheChartedMetrics) {
  EXPECT_EQ(tensorboard_tag("train", "train_loss"), "train/loss");
  EXPECT_EQ(tensorboard_tag("train", "lr"), "train/lr");
  EXPECT_EQ(tensorboard_tag("train", "images_per_sec"), "train/images_per_sec");
  EXPECT_EQ(tensorboard_tag("train", "data_wait_ms"), "train/data_wait_ms");
  EXPECT_EQ(tensorboard_tag("train", "exposed_comm_ms"), "train/exposed_comm_ms");
  EXPECT_EQ(tensorboard_tag("eval", "test_loss"), "test/loss");
  EXPECT_EQ(tensorboard_tag("eval", "test_accuracy"), "test/accuracy");
  EXPECT_EQ(tensorboard_tag("train", "step"), "");  // the step is the x axis
  EXPECT_EQ(tensorboard_tag("train", "epoch"), "");
  EXPECT_EQ(tensorboard_tag("start", "base_lr"), "");
  EXPECT_EQ(tensorboard_tag("done", "images_per_sec"), "");
}

TEST(TensorBoard, WrittenFileReadsBackWithValidCrcsWhileStillOpen) {
  TempDir dir;
  const std::string tb = dir.file("runs/tb");  // created, parents included
  TensorBoardWriter writer(tb);
  writer.add_scalars(10, {{"train/loss", 2.5f}});
  writer.add_scalars(20, {{"train/loss", 1.25f}, {"train/lr", 0.1f}});
  // Not closed: what a crashed job leaves must already be whole records in the file.
  const std::string path = event_file(tb);
  EXPECT_EQ(path, writer.path());
  EXPECT_TRUE(std::regex_match(std::filesystem::path(path).filename().string(),
                               std::regex(R"(events\.out\.tfevents\.[0-9]{10}\..+)")))
      << path;
  const std::vector<Bytes> records = read_records(path);
  ASSERT_EQ(records.size(), 3u);
  // The first record: wall_time, then file_version "brain.Event:2" closing it.
  const Bytes version = concat({{0x1a, 13}, bytes_of("brain.Event:2")});
  ASSERT_EQ(records[0].size(), 9u + version.size());
  EXPECT_EQ(records[0][0], 0x09);
  EXPECT_EQ(Bytes(records[0].begin() + 9, records[0].end()), version);
  double wall_time;
  std::memcpy(&wall_time, records[0].data() + 1, 8);
  EXPECT_GT(wall_time, 1.7e9);  // seconds since 1970, not a clock of the process
  // The scalars: the same bytes as encoded, after their own wall time.
  const Bytes second = encode_scalars_event(0.0, 20, {{"train/loss", 1.25f}, {"train/lr", 0.1f}});
  EXPECT_EQ(Bytes(records[2].begin() + 9, records[2].end()), Bytes(second.begin() + 9, second.end()));
  // The framing's masked CRC-32C of the first header, checked here by hand too.
  const Bytes raw = [&] {
    std::ifstream in(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), {});
  }();
  uint32_t stored;
  std::memcpy(&stored, raw.data() + 8, 4);
  EXPECT_EQ(stored, crc32c_mask(crc32c(raw.data(), 8)));
}

TEST(TensorBoard, TwoWritersInOneSecondKeepBothFiles) {
  TempDir dir;
  TensorBoardWriter a(dir.str()), b(dir.str());
  EXPECT_NE(a.path(), b.path());
  EXPECT_EQ(read_records(a.path()).size(), 1u);
  EXPECT_EQ(read_records(b.path()).size(), 1u);
}

TEST(TensorBoard, UncreatableDirectoryIsAnErrorNamingIt) {
  TempDir dir;
  std::ofstream(dir.file("file")) << "x";
  try {
    TensorBoardWriter writer(dir.file("file/tb"));
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("output.tensorboard '" + dir.file("file/tb") + "'"), std::string::npos)
        << e.what();
  }
}

TEST(MetricsLogTensorBoard, ChartedValuesOfEventsWithAStep) {
  TempDir dir;
  {
    MetricsLog log(true, dir.file("m.jsonl"), dir.file("tb"));
    log.emit("start", "start", {{"world_size", 2}, {"base_lr", 0.1}});  // no step: not charted
    log.emit("train", "step 8", {{"epoch", 1}, {"step", 8}, {"train_loss", 2.25}, {"lr", 0.5}});
    log.emit("eval", "epoch 1", {{"epoch", 1}, {"step", 16}, {"test_loss", 1.5}, {"test_accuracy", 0.75}});
  }
  const std::vector<Bytes> records = read_records(event_file(dir.file("tb")));
  ASSERT_EQ(records.size(), 3u);
  auto payload = [](const Bytes& event) { return Bytes(event.begin() + 9, event.end()); };
  EXPECT_EQ(payload(records[1]), payload(encode_scalars_event(0, 8, {{"train/loss", 2.25f}, {"train/lr", 0.5f}})));
  EXPECT_EQ(payload(records[2]),
            payload(encode_scalars_event(0, 16, {{"test/loss", 1.5f}, {"test/accuracy", 0.75f}})));
}

TEST(MetricsLogTensorBoard, OffRanksAndEmptyDirectoryWriteNothing) {
  TempDir dir;
  {
    MetricsLog not_rank0(false, "", dir.file("tb0"));
    not_rank0.emit("train", "step 1", {{"step", 1}, {"lr", 0.1}});
    MetricsLog none(true, "", "");
    none.emit("train", "step 1", {{"step", 1}, {"lr", 0.1}});
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("tb0")));
  EXPECT_TRUE(std::filesystem::is_empty(dir.str()));
}

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(MetricsLogFile, ReplacedByAFreshRunContinuedByAResumedOne) {
  TempDir dir;
  const std::string path = dir.file("m.jsonl");
  std::ofstream(path) << "{\"event\":\"earlier run\"}\n";
  {
    MetricsLog fresh(true, path);
    fresh.emit("train", "step 1", {{"step", 1}});
  }
  EXPECT_EQ(text_of(path), "{\"event\":\"train\",\"step\":1.0}\n");
  {
    MetricsLog resumed(true, path);
    resumed.continue_file();
    resumed.emit("train", "step 2", {{"step", 2}});
  }
  EXPECT_EQ(text_of(path), "{\"event\":\"train\",\"step\":1.0}\n{\"event\":\"train\",\"step\":2.0}\n");
}

}  // namespace
}  // namespace sdp
