// Checkpoint files: round trip of every dtype and shape, atomic writes that never cost the
// previous checkpoint, keep_last, the newest-complete choice that skips damaged files, and
// the background writer.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "io/checkpoint.hpp"
#include "io/safetensors.hpp"

namespace sdp {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "sdp-ckpt-test-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

Tensor patterned(const Shape& shape, DType dtype, uint8_t seed) {
  Tensor t(shape, dtype);
  auto* bytes = static_cast<uint8_t*>(t.raw());
  for (std::size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(seed + 31 * i);
  return t;
}

// A snapshot of `tensors` (one arena each) for `step`.
CheckpointSnapshot snapshot_of(const std::string& dir, int64_t step,
                               const std::vector<NamedTensor>& tensors, int keep_last = 0) {
  CheckpointSnapshot s;
  s.dir = dir;
  s.step = step;
  s.keep_last = keep_last;
  s.metadata = {{"format", kCheckpointFormat},
                {"step", std::to_string(step)},
                {"note", "a\nmulti-line \"value\""}};
  for (const NamedTensor& t : tensors) add_to_snapshot(s, ArenaViews{t.tensor, {t}});
  return s;
}

std::vector<NamedTensor> sample_tensors() {
  return {{"conv1.weight", patterned({6, 1, 5, 5}, DType::kF32, 1)},
          {"bn1.running_mean", patterned({6}, DType::kF32, 2)},
          {"half", patterned({3, 4}, DType::kF16, 3)},
          {"brain", patterned({2, 3, 1}, DType::kBF16, 4)},
          {"scalar", patterned({}, DType::kF32, 5)},
          {"empty", patterned({0, 4}, DType::kF32, 6)},
          {"optimizer.conv1.weight.momentum_buffer", patterned({6, 1, 5, 5}, DType::kF32, 7)}};
}

TEST(Checkpoint, RoundTripOfEveryDtypeAndShape) {
  TempDir dir;
  const auto tensors = sample_tensors();
  const std::string path = write_checkpoint(snapshot_of(dir.str(), 42, tensors));
  EXPECT_EQ(path, checkpoint_path(dir.str(), 42));
  const Checkpoint c = read_checkpoint(path);
  EXPECT_EQ(c.step, 42);
  EXPECT_EQ(c.meta("note"), "a\nmulti-line \"value\"");
  ASSERT_EQ(c.tensors.size(), tensors.size());
  for (const NamedTensor& want : tensors) {
    const NamedTensor* got = nullptr;
    for (const NamedTensor& t : c.tensors)
      if (t.name == want.name) got = &t;
    ASSERT_NE(got, nullptr) << want.name;
    EXPECT_EQ(got->tensor.shape(), want.tensor.shape()) << want.name;
    EXPECT_EQ(got->tensor.dtype(), want.tensor.dtype()) << want.name;
    ASSERT_EQ(got->tensor.nbytes(), want.tensor.nbytes()) << want.name;
    EXPECT_EQ(std::memcmp(got->tensor.raw(), want.tensor.raw(), want.tensor.nbytes()), 0)
        << want.name;
  }
}

TEST(Checkpoint, SnapshotIsACopy) {
  TempDir dir;
  Tensor arena = patterned({32}, DType::kF32, 9);
  CheckpointSnapshot s;
  s.dir = dir.str();
  s.step = 1;
  s.metadata = {{"format", kCheckpointFormat}, {"step", "1"}};
  add_to_snapshot(
      s,
      ArenaViews{arena, {{"a", arena.slice(0, 16)}, {"b", arena.slice(16, 16).reshaped({4, 4})}}});
  const float before = arena.data<float>()[20];
  arena.fill(0.0f);  // the step loop goes on changing the live arena
  const Checkpoint c = read_checkpoint(write_checkpoint(s));
  ASSERT_EQ(c.tensors.size(), 2u);
  EXPECT_EQ(c.tensors[1].name, "b");
  EXPECT_EQ(c.tensors[1].tensor.shape(), (Shape{4, 4}));
  EXPECT_EQ(c.tensors[1].tensor.data<float>()[4], before);
}

TEST(Checkpoint, KeepLastRemovesOnlyOlderOnes) {
  TempDir dir;
  for (int64_t step : {10, 20, 30, 40})
    write_checkpoint(snapshot_of(dir.str(), step, sample_tensors(), 2));
  const auto all = list_checkpoints(dir.str());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, 40);
  EXPECT_EQ(all[1].first, 30);
}

TEST(Checkpoint, FailedWriteKeepsThePreviousCheckpoint) {
  TempDir dir;
  const std::string previous = write_checkpoint(snapshot_of(dir.str(), 1, sample_tensors(), 1));
  // The final name of step 2 is taken by a directory: the rename fails after the data was
  // written to the temporary file (as a full disk fails a write).
  fs::create_directories(checkpoint_path(dir.str(), 2));
  try {
    write_checkpoint(snapshot_of(dir.str(), 2, sample_tensors(), 1));
    FAIL() << "expected a RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt-000000002.safetensors"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(read_checkpoint(previous).step, 1);  // not pruned, not damaged
  for (const auto& entry : fs::directory_iterator(dir.str()))
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos)
        << "temporary file left: " << entry.path();
}

TEST(Checkpoint, AtomicWriteFailingMidwayLeavesTheOldFile) {
  TempDir dir;
  const std::string path = dir.str() + "/f.bin";
  write_file_atomically(path, [&](std::FILE* f) { write_all(f, "old", 3, path); });
  EXPECT_THROW(write_file_atomically(path,
                                     [&](std::FILE* f) {
                                       write_all(f, "new, half", 9, path);
                                       throw RuntimeError("disk full (simulated)");
                                     }),
               RuntimeError);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "old");
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir.str())) (void)entry, ++files;
  EXPECT_EQ(files, 1);
}

void damage(const std::string& path, const std::function<void(std::string&)>& edit) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  edit(bytes);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(Checkpoint, NewestCompleteSkipsTruncatedBadHeaderAndBadJson) {
  TempDir dir;
  for (int64_t step : {1, 2, 3, 4, 5})
    write_checkpoint(snapshot_of(dir.str(), step, sample_tensors()));
  damage(checkpoint_path(dir.str(), 5),
         [](std::string& b) { b.resize(b.size() - 7); });     // truncated
  damage(checkpoint_path(dir.str(), 4), [](std::string& b) {  // header length
    const uint64_t huge = uint64_t{1} << 40;
    std::memcpy(b.data(), &huge, 8);
  });
  damage(checkpoint_path(dir.str(), 3), [](std::string& b) { b[8] = '#'; });  // JSON
  save_safetensors(checkpoint_path(dir.str(), 2), sample_tensors(), {{"format", "another tool's"}});  // not ours
  std::ofstream(dir.str() + "/ckpt-000000009.safetensors.tmp.123") << "a write in progress";
  std::vector<std::string> skipped;
  const auto found = find_newest_checkpoint(dir.str(), &skipped);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->step, 1);
  ASSERT_EQ(skipped.size(), 4u);
  EXPECT_NE(skipped[0].find("ckpt-000000005.safetensors"), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[1].find("ckpt-000000004.safetensors"), std::string::npos) << skipped[1];
  EXPECT_NE(skipped[2].find("ckpt-000000003.safetensors"), std::string::npos) << skipped[2];
  EXPECT_NE(skipped[3].find("not an sdp-train checkpoint"), std::string::npos) << skipped[3];
}

// Where tensor `name`'s bytes start in checkpoint file `bytes`.
std::size_t data_offset_of(const std::string& bytes, const std::string& name) {
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  const auto header = nlohmann::json::parse(bytes.substr(8, header_size));
  return 8 + header_size + header.at(name).at("data_offsets")[0].get<std::size_t>();
}

TEST(Checkpoint, ABitFlippedCheckpointIsSkippedNamingTheTensor) {
  TempDir dir;
  for (int64_t step : {1, 2, 3}) write_checkpoint(snapshot_of(dir.str(), step, sample_tensors()));
  // One bit of a weight: the file still parses, only its checksum can tell.
  damage(checkpoint_path(dir.str(), 3), [](std::string& b) { b[data_offset_of(b, "conv1.weight") + 17] ^= 0x04; });
  // The metadata (its "note"): a value a resume would believe.
  damage(checkpoint_path(dir.str(), 2), [](std::string& b) { b[b.find("multi-line")] = 'M'; });
  std::vector<std::string> skipped;
  const auto found = find_newest_checkpoint(dir.str(), &skipped);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->step, 1);
  EXPECT_TRUE(found->checksummed);
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_NE(skipped[0].find("ckpt-000000003.safetensors: tensor 'conv1.weight' is damaged"), std::string::npos)
      << skipped[0];
  EXPECT_NE(skipped[1].find("ckpt-000000002.safetensors: the metadata is damaged"), std::string::npos) << skipped[1];
}

TEST(Checkpoint, ACheckpointWithoutChecksumsStillLoads) {
  // As written before checksums: the same layout, no "crc32c" in the metadata.
  TempDir dir;
  const std::string path = write_checkpoint(snapshot_of(dir.str(), 8, sample_tensors()));
  damage(path, [](std::string& b) {
    uint64_t header_size = 0;
    std::memcpy(&header_size, b.data(), 8);
    auto header = nlohmann::json::parse(b.substr(8, header_size));
    header["__metadata__"].erase(kChecksumsKey);
    std::string text = header.dump();
    text.append(header_size - text.size(), ' ');  // shorter: pad to the same data offset
    b.replace(8, header_size, text);
  });
  const Checkpoint c = read_checkpoint(path);
  EXPECT_EQ(c.step, 8);
  EXPECT_FALSE(c.checksummed);
  EXPECT_EQ(c.tensors.size(), sample_tensors().size());
}

TEST(Checkpoint, LeftoversOfAKilledWriteAreRemovedAndNothingElse) {
  TempDir dir;
  write_checkpoint(snapshot_of(dir.str(), 10, sample_tensors()));
  const std::string leftover = dir.str() + "/ckpt-000000020.safetensors.tmp.4242";
  const std::string users_file = dir.str() + "/notes.tmp.1";
  for (const std::string& p : {leftover, users_file}) std::ofstream(p) << "partial";
  EXPECT_EQ(remove_interrupted_checkpoint_writes(dir.str()), std::vector<std::string>{leftover});
  EXPECT_FALSE(fs::exists(leftover));
  EXPECT_TRUE(fs::exists(users_file));
  EXPECT_TRUE(fs::exists(checkpoint_path(dir.str(), 10)));
  EXPECT_TRUE(remove_interrupted_checkpoint_writes(dir.str() + "/absent").empty());
}

TEST(Checkpoint, NoDirectoryOrNoCheckpointIsNone) {
  TempDir dir;
  EXPECT_FALSE(find_newest_checkpoint(dir.str() + "/absent", nullptr).has_value());
  EXPECT_FALSE(find_newest_checkpoint(dir.str(), nullptr).has_value());
}

TEST(CheckpointWriter, WritesInTheBackgroundAndReportsFailures) {
  TempDir dir;
  CheckpointWriter writer;
  writer.submit(snapshot_of(dir.str(), 7, sample_tensors()));
  writer.submit(snapshot_of(dir.str(), 8, sample_tensors()));  // waits for step 7 first
  writer.wait();
  EXPECT_EQ(writer.last_written(), checkpoint_path(dir.str(), 8));
  EXPECT_EQ(list_checkpoints(dir.str()).size(), 2u);

  std::ofstream(dir.str() + "/file") << "x";  // a file where the directory should be
  writer.submit(snapshot_of(dir.str() + "/file/sub", 9, sample_tensors()));
  EXPECT_THROW(writer.wait(), RuntimeError);
  EXPECT_NO_THROW(writer.wait());  // reported once
}

}  // namespace
}  // namespace sdp
