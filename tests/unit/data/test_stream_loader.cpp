// Streamed sets: tar shards and gzip TFRecords read in order, split over ranks by shard (or by
// record when shards are fewer than ranks), shuffled through a bounded buffer, decoded on the
// loader's workers; steps per epoch agreed from the shard counts, and a resumed loader reading
// exactly what an uninterrupted one reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "data/sets/stream_source.hpp"
#include "data/loading/stream_loader.hpp"
#include "data/formats/tar_shards.hpp"
#include "data/formats/tf_example.hpp"
#include "data/formats/tfrecord.hpp"
#include "unit/data/expect_input_error.hpp"
#include "unit/data/image_samples.hpp"
#include "unit/data/temp_dir.hpp"

namespace sdp {
namespace {

using sdp::testing::Bytes;
using sdp::testing::expect_input_error;
using sdp::testing::TempDir;

constexpr int kClasses = 3;
// Shards of uneven sizes, so that ranks' passes end at different steps.
const std::vector<int> kShardSizes = {5, 3, 7, 1};
constexpr int kTotal = 16;

int red_of(int64_t id) {
  return 10 + 15 * static_cast<int>(id);
}
int label_of(int64_t id) {
  return static_cast<int>(id % kClasses);
}

// Sample `id`: a flat 24 x 20 JPEG whose red channel is red_of(id).
Bytes sample_jpeg(int64_t id) {
  const Bytes pixels = sdp::testing::make_pixels(24, 20, 3, [&](int, int, int c) {
    return c == 0 ? red_of(id) : c == 1 ? 90 : 160;
  });
  return sdp::testing::encode_jpeg(pixels, 24, 20, TJPF_RGB, TJSAMP_444, 95);
}

Bytes text(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

// kShardSizes as WebDataset tar shards under dir/train (shard 1 gzip-compressed); ids count
// through the shards in order, as StreamSource numbers them.
std::string write_tar_shards(const TempDir& dir) {
  const std::string root = dir.file("train");
  std::filesystem::create_directories(root);
  int64_t id = 0;
  for (std::size_t s = 0; s < kShardSizes.size(); ++s) {
    const bool gzip = s == 1;
    TarWriter tar(root + "/shard-" + std::to_string(s) + (gzip ? ".tar.gz" : ".tar"), gzip);
    for (int k = 0; k < kShardSizes[s]; ++k, ++id) {
      const std::string key = "part/s" + std::to_string(id);
      tar.add_file(key + ".jpg", sample_jpeg(id));
      tar.add_file(key + ".cls", text(std::to_string(label_of(id)) + "\n"));
    }
    tar.close();
  }
  return root;
}

StreamSourceOptions tar_options() {
  StreamSourceOptions options;
  options.format = StreamFormat::kTarShards;
  return options;
}

EncodedImageOptions small_images(int workers = 2) { return sdp::testing::small_images(kClasses, workers); }

float normalized(int byte) {
  return (byte / 255.0f - 0.5f) / 0.25f;
}

std::vector<int64_t> drain_ids(RecordStream& stream, const StreamSource& source, int64_t limit) {
  std::vector<int64_t> ids;
  StreamedRecord r;
  while (static_cast<int64_t>(ids.size()) < limit && stream.next(r))
    ids.push_back(source.first_id(r.record.shard) + r.record.record);
  return ids;
}

TEST(PassShare, ShardsSplitOverRanksCoverEveryRecordOncePerPass) {
  const std::vector<int64_t> counts(kShardSizes.begin(), kShardSizes.end());
  for (int world : {1, 2, 3, 4}) {
    for (int64_t pass = 0; pass < 5; ++pass) {
      std::multiset<int> shards;
      int64_t samples = 0;
      for (int r = 0; r < world; ++r) {
        const PassShare share = pass_share(counts, 7, pass, r, world, true);
        EXPECT_EQ(share.stride, 1);
        shards.insert(share.shards.begin(), share.shards.end());
        samples += share.samples;
      }
      EXPECT_EQ(shards, (std::multiset<int>{0, 1, 2, 3})) << "world " << world << " pass " << pass;
      EXPECT_EQ(samples, kTotal);
    }
  }
  // The shard order changes from pass to pass.
  EXPECT_NE(pass_share(counts, 7, 0, 0, 1, true).shards,
            pass_share(counts, 7, 1, 0, 1, true).shards);
  EXPECT_EQ(pass_share(counts, 7, 3, 0, 1, false).shards, (std::vector<int>{0, 1, 2, 3}));
}

TEST(PassShare, FewerShardsThanRanksSplitTheRecords) {
  const std::vector<int64_t> counts(kShardSizes.begin(), kShardSizes.end());
  int64_t samples = 0;
  for (int r = 0; r < 6; ++r) {
    const PassShare share = pass_share(counts, 7, 0, r, 6, true);
    EXPECT_EQ(share.shards.size(), 4u);
    EXPECT_EQ(share.stride, 6);
    EXPECT_EQ(share.phase, r);
    EXPECT_EQ(share.samples, r < kTotal % 6 ? 3 : 2);
    samples += share.samples;
  }
  EXPECT_EQ(samples, kTotal);
}

TEST(StreamSource, CountsShardsThroughAnIndexWrittenOnFirstUse) {
  TempDir dir;
  const std::string root = write_tar_shards(dir);
  const StreamSource source(root, tar_options());
  ASSERT_EQ(source.num_shards(), 4);
  EXPECT_EQ(source.total(), kTotal);
  for (int s = 0; s < 4; ++s)
    EXPECT_EQ(source.shard_samples(s), kShardSizes[static_cast<std::size_t>(s)]);
  EXPECT_EQ(source.first_id(2), 8);
  EXPECT_EQ(source.name(), "tar-shards:" + root);

  // The index is what is read next time: a fresh one with another count is believed...
  const std::string shard = root + "/shard-0.tar";
  ASSERT_TRUE(std::filesystem::exists(shard + ".idx"));
  {
    std::ofstream index(shard + ".idx");
    index << "sdp-stream-index 1\nformat tar-shards\ndata_bytes "
          << std::filesystem::file_size(shard) << "\nsamples 9\n";
  }
  std::filesystem::last_write_time(
      shard + ".idx", std::filesystem::last_write_time(shard) + std::chrono::seconds(5));
  EXPECT_EQ(count_stream_samples(shard, tar_options()), 9);
  // ...and one older than its shard is not.
  std::filesystem::last_write_time(
      shard, std::filesystem::last_write_time(shard + ".idx") + std::chrono::seconds(5));
  EXPECT_EQ(count_stream_samples(shard, tar_options()), 5);
}

TEST(StreamSource, GzipTfRecordsAreCountedAndRead) {
  TempDir dir;
  const std::string path = dir.file("train.tfrecord.gz");
  TfRecordWriter writer(path, /*gzip=*/true);
  for (int64_t id = 0; id < 6; ++id)
    writer.write(
        encode_example(sample_jpeg(id), label_of(id) + 1, "image/encoded", "image/class/label"));
  writer.close();
  StreamSourceOptions options;
  options.label_offset = 1;
  const auto source = std::make_shared<const StreamSource>(path, options);
  EXPECT_EQ(source->total(), 6);
  RecordStream stream(std::make_shared<ShardRecords>(source, 1, 0, 1, false), {1, 0, 0, false, 4});
  stream.start(0, 0);
  StreamedRecord r;
  for (int64_t id = 0; id < 6; ++id) {
    ASSERT_TRUE(stream.next(r));
    EXPECT_EQ(r.record.record, id);
    EXPECT_EQ(r.record.label, label_of(id));
    EXPECT_EQ(r.record.image, sample_jpeg(id));
  }
  EXPECT_FALSE(stream.next(r));
}

TEST(RecordStream, EachPassIsAPermutationShuffledWithinTheBuffer) {
  TempDir dir;
  const auto source = std::make_shared<const StreamSource>(write_tar_shards(dir), tar_options());
  // Shards in name order, so a record's reading position is its id.
  const int64_t buffer = 4;
  RecordStream stream(std::make_shared<ShardRecords>(source, 3, 0, 1, /*shuffle_shards=*/false),
                      {3, 0, buffer, /*repeat=*/true, 5});
  stream.start(0, 0);
  const std::vector<int64_t> ids = drain_ids(stream, *source, 2 * kTotal);
  ASSERT_EQ(ids.size(), 2u * kTotal);
  std::vector<int64_t> all(kTotal);
  std::iota(all.begin(), all.end(), 0);
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<int64_t> got(ids.begin() + pass * kTotal, ids.begin() + (pass + 1) * kTotal);
    EXPECT_NE(got, all) << "pass " << pass << " was not shuffled";
    // A record leaves at most `buffer` places after it was read: the buffer bounds memory.
    for (int j = 0; j < kTotal; ++j) EXPECT_LE(got[static_cast<std::size_t>(j)], j + buffer);
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, all) << "pass " << pass;
  }
  // Without a buffer the stream is the reading order.
  RecordStream plain(std::make_shared<ShardRecords>(source, 3, 0, 1, false), {3, 0, 0, false, 5});
  plain.start(0, 0);
  EXPECT_EQ(drain_ids(plain, *source, kTotal + 1), all);
}

TEST(RecordStream, RanksReadDisjointSharesOfEveryPass) {
  TempDir dir;
  const auto source = std::make_shared<const StreamSource>(write_tar_shards(dir), tar_options());
  for (int world : {2, 5}) {  // by shard, then by record
    std::vector<int64_t> seen;
    for (int r = 0; r < world; ++r) {
      RecordStream stream(std::make_shared<ShardRecords>(source, 9, r, world, true),
                          {9, r, 3, /*repeat=*/false, 8});
      stream.start(0, 0);
      const std::vector<int64_t> ids = drain_ids(stream, *source, kTotal + 1);
      EXPECT_EQ(static_cast<int64_t>(ids.size()),
                pass_share(source->shard_counts(), 9, 0, r, world, true).samples);
      seen.insert(seen.end(), ids.begin(), ids.end());
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int64_t> all(kTotal);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(seen, all) << "world " << world;
  }
}

struct StepRecord {
  std::vector<int64_t> indices;
  std::vector<int32_t> labels;
  std::vector<float> images;
  SampleCursor cursor, next_cursor;
};

std::vector<StepRecord> collect(TrainLoader& loader, const SampleCursor& from, int64_t epochs) {
  std::vector<StepRecord> steps;
  for (SampleCursor at = from; at.epoch < epochs; at = SampleCursor{at.epoch + 1, 0}) {
    loader.start(at);
    while (const Batch* b = loader.next())
      steps.push_back(
          {b->indices, b->labels,
           std::vector<float>(b->images.data<float>(), b->images.data<float>() + b->images.numel()),
           b->cursor, b->next_cursor});
  }
  return steps;
}

// The loader's records: this rank's share of the shards.
std::shared_ptr<RankRecords> shard_records(const std::shared_ptr<const StreamSource>& source,
                                           const LoaderOptions& options) {
  return std::make_shared<ShardRecords>(source, options.seed, options.rank, options.world, true);
}

LoaderOptions loader_options(int rank, int world, bool augment) {
  LoaderOptions options;
  options.batch_size = 2;
  options.seed = 11;
  options.rank = rank;
  options.world = world;
  options.prefetch = 2;
  options.augment.enabled = augment;
  options.augment.random_resized_crop = augment;
  return options;
}

TEST(StreamTrainLoader, BatchesHoldTheirRecordsDecodedWithTheirLabels) {
  TempDir dir;
  const auto source = std::make_shared<const StreamSource>(write_tar_shards(dir), tar_options());
  StreamTrainLoader loader(shard_records(source, loader_options(0, 2, false)), source->total(),
                           small_images(), loader_options(0, 2, false), 4);
  EXPECT_EQ(loader.steps_per_epoch(), kTotal / 4);
  const std::vector<StepRecord> steps = collect(loader, {}, 3);
  ASSERT_EQ(steps.size(), 3u * kTotal / 4);
  for (std::size_t s = 0; s < steps.size(); ++s) {
    EXPECT_EQ(steps[s].cursor,
              (SampleCursor{static_cast<int64_t>(s) / 4, static_cast<int64_t>(s % 4) * 4}));
    for (std::size_t k = 0; k < 2; ++k) {
      const int64_t id = steps[s].indices[k];
      EXPECT_EQ(steps[s].labels[k], label_of(id));
      // The evaluation transform of a flat image: every red value is the sample's own.
      EXPECT_NEAR(steps[s].images[k * 3 * 16 * 16], normalized(red_of(id)), 0.05f)
          << "sample " << id;
    }
  }
}

TEST(StreamTrainLoader, AResumedLoaderReadsAndAugmentsAsAnUninterruptedOne) {
  TempDir dir;
  const auto source = std::make_shared<const StreamSource>(write_tar_shards(dir), tar_options());
  for (int world : {1, 2, 5}) {
    for (int rank = 0; rank < world; rank += std::max(1, world - 1)) {
      StreamTrainLoader whole(shard_records(source, loader_options(rank, world, true)),
                              source->total(), small_images(), loader_options(rank, world, true),
                              4);
      const int64_t spe = whole.steps_per_epoch();
      const std::vector<StepRecord> all = collect(whole, {}, 4);
      ASSERT_EQ(static_cast<int64_t>(all.size()), 4 * spe);
      for (int64_t step : {int64_t{1}, spe + 1, 3 * spe - 1}) {
        StreamTrainLoader resumed(shard_records(source, loader_options(rank, world, true)),
                                  source->total(), small_images(),
                                  loader_options(rank, world, true), 4);
        const std::vector<StepRecord> rest =
            collect(resumed, all[static_cast<std::size_t>(step)].cursor, 4);
        ASSERT_EQ(static_cast<int64_t>(rest.size()), 4 * spe - step);
        for (std::size_t s = 0; s < rest.size(); ++s) {
          const StepRecord& a = all[static_cast<std::size_t>(step) + s];
          EXPECT_EQ(rest[s].indices, a.indices)
              << "world " << world << " from step " << step << " + " << s;
          EXPECT_EQ(rest[s].labels, a.labels);
          EXPECT_EQ(rest[s].images, a.images);  // bit for bit: the crop draws repeat
          EXPECT_EQ(rest[s].next_cursor, a.next_cursor);
        }
      }
    }
  }
}

TEST(StreamTrainLoader, FewerSamplesThanAGlobalBatchIsAnInputError) {
  TempDir dir;
  const auto source = std::make_shared<const StreamSource>(write_tar_shards(dir), tar_options());
  LoaderOptions options = loader_options(0, 3, false);
  options.batch_size = 6;
  expect_input_error(
      [&] {
        StreamTrainLoader(shard_records(source, options), source->total(), small_images(), options,
                          4);
      },
      {"16 samples are fewer than one global batch of 18"});
}

TEST(StreamEvalLoader, EverySampleOnceOverTheRanks) {
  TempDir dir;
  const auto source = std::make_shared<const StreamSource>(write_tar_shards(dir), tar_options());
  for (int world : {1, 3, 6}) {
    std::vector<int64_t> seen;
    for (int r = 0; r < world; ++r) {
      StreamEvalLoader loader(std::make_shared<ShardRecords>(source, 0, r, world, false),
                              small_images(1), 3, r, 1);
      loader.start();
      int64_t count = 0;
      while (const Batch* b = loader.next()) {
        for (std::size_t k = 0; k < b->indices.size(); ++k) {
          EXPECT_EQ(b->labels[k], label_of(b->indices[k]));
          EXPECT_NEAR(b->images.data<float>()[k * 3 * 16 * 16], normalized(red_of(b->indices[k])),
                      0.05f);
        }
        seen.insert(seen.end(), b->indices.begin(), b->indices.end());
        count += b->size();
      }
      EXPECT_EQ(count, loader.num_samples());
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int64_t> all(kTotal);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(seen, all) << "world " << world;
  }
}

TEST(StreamSource, ATruncatedShardIsAnInputErrorNamingIt) {
  TempDir dir;
  const std::string root = write_tar_shards(dir);
  const std::string shard = root + "/shard-2.tar";
  std::filesystem::resize_file(shard, 512 * 5 + 100);
  expect_input_error([&] { StreamSource(root, tar_options()); }, {shard, "truncated"});
}

TEST(StreamSource, ASampleWithoutItsLabelIsAnInputErrorNamingItsRecord) {
  TempDir dir;
  const std::string path = dir.file("one.tar");
  TarWriter tar(path);
  tar.add_file("a.jpg", sample_jpeg(0));
  tar.add_file("a.cls", text("1"));
  tar.add_file("b.jpg", sample_jpeg(1));
  tar.close();
  expect_input_error([&] { StreamSource(path, tar_options()); },
                     {path + ": record 1 (from 0)", "'b'", "no .cls"});
}

TEST(StreamTrainLoader, ALabelOutOfRangeEndsTheIterationNamingTheRecord) {
  TempDir dir;
  const std::string path = dir.file("one.tar");
  TarWriter tar(path);
  for (int i = 0; i < 4; ++i) {
    tar.add_file("s" + std::to_string(i) + ".jpg", sample_jpeg(i));
    tar.add_file("s" + std::to_string(i) + ".cls", text(i == 2 ? "7" : "0"));
  }
  tar.close();
  const auto source = std::make_shared<const StreamSource>(path, tar_options());
  StreamTrainLoader loader(shard_records(source, loader_options(0, 1, false)), source->total(),
                           small_images(), loader_options(0, 1, false), 0);
  loader.start_epoch(0);
  expect_input_error(
      [&] {
        while (loader.next() != nullptr) {
        }
      },
      {path + ": record 2 (from 0)", "label 7 is outside [0, 3)"});
}

TEST(StreamTrainLoader, DestroyedMidEpochWithoutHanging) {
  TempDir dir;
  const auto source = std::make_shared<const StreamSource>(write_tar_shards(dir), tar_options());
  for (int i = 0; i < 20; ++i) {
    StreamTrainLoader loader(shard_records(source, loader_options(0, 1, true)), source->total(),
                             small_images(), loader_options(0, 1, true), 8);
    loader.start_epoch(0);
    ASSERT_NE(loader.next(), nullptr);
  }
}

}  // namespace
}  // namespace sdp
