// Encoded image sets: samples read by index from TFRecords or an image folder, decoded and
// transformed on a pool of workers, into the batches the loaders hand the model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "data/loading/data_loader.hpp"
#include "data/sets/encoded_images.hpp"
#include "data/formats/tf_example.hpp"
#include "data/formats/tfrecord.hpp"
#include "unit/data/expect_input_error.hpp"
#include "unit/data/image_samples.hpp"
#include "unit/data/temp_dir.hpp"

namespace sdp {
namespace {

using sdp::testing::Bytes;
using sdp::testing::expect_input_error;
using sdp::testing::small_images;
using sdp::testing::TempDir;

// A w x h JPEG of one colour (r, g, b): decoding and any resize keep it (within JPEG's error).
Bytes flat_jpeg(int w, int h, int r, int g, int b) {
  const Bytes pixels = sdp::testing::make_pixels(w, h, 3, [&](int, int, int c) { return c == 0 ? r : c == 1 ? g : b; });
  return sdp::testing::encode_jpeg(pixels, w, h, TJPF_RGB, TJSAMP_444, 95);
}

int shade(int i) { return 20 + 40 * i; }

// Record i: a flat image of shade(i) in red, sized 40 + 8i by 30 + 4i, labelled i + 1 (the
// ImageNet convention, undone by label_offset: 1).
void write_shards(const TempDir& dir, int records) {
  std::filesystem::create_directories(dir.file("train"));
  TfRecordWriter first(dir.file("train/shard-0")), second(dir.file("train/shard-1"));
  for (int i = 0; i < records; ++i)
    (i < records / 2 ? first : second)
        .write(encode_example(flat_jpeg(40 + 8 * i, 30 + 4 * i, shade(i), 100, 200), i + 1, "image/encoded",
                              "image/class/label"));
  first.close();
  second.close();
}

float normalized(int byte) { return (byte / 255.0f - 0.5f) / 0.25f; }

TEST(EncodedImages, TfRecordShardsDecodeInOrderWithTheirLabels) {
  TempDir dir;
  write_shards(dir, 6);
  TfRecordSourceOptions records;
  records.label_offset = 1;
  EncodedImageSet set(open_tfrecord_source(dir.file("train"), records), small_images(6));
  ASSERT_EQ(set.count(), 6);
  EXPECT_EQ(set.height(), 16);
  EXPECT_EQ(set.num_classes(), 6);
  Batch batch;
  set.make_assembler({})->assemble({5, 0, 3}, 0, batch);
  ASSERT_EQ(batch.images.shape(), (Shape{3, 3, 16, 16}));
  EXPECT_EQ(batch.labels, (std::vector<int32_t>{5, 0, 3}));
  const float* x = batch.images.data<float>();
  for (int k = 0; k < 3; ++k) {
    const int i = std::vector<int>{5, 0, 3}[k];
    for (int p = 0; p < 16 * 16; ++p) {  // planar: red, then green, then blue
      ASSERT_NEAR(x[(k * 3 + 0) * 256 + p], normalized(shade(i)), 4 / 255.0 / 0.25) << "sample " << i;
      ASSERT_NEAR(x[(k * 3 + 2) * 256 + p], normalized(200), 4 / 255.0 / 0.25) << "sample " << i;
    }
  }
}

TEST(EncodedImages, TrainingCropsDependOnSeedEpochAndSampleOnly) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("t"));
  TfRecordWriter writer(dir.file("t/s"));
  for (int i = 0; i < 5; ++i)
    writer.write(encode_example(sdp::testing::encode_jpeg(sdp::testing::gradient_rgb(64 + 16 * i, 48), 64 + 16 * i, 48),
                                i % 3, "image/encoded", "image/class/label"));
  writer.close();
  auto source = std::shared_ptr<const EncodedSource>(open_tfrecord_source(dir.file("t"), {}));
  AugmentOptions train;
  train.enabled = true;
  train.seed = 7;
  auto run = [&](int workers, int64_t epoch) {
    EncodedImageSet set(source, small_images(3, workers));
    Batch batch;
    set.make_assembler(train)->assemble({0, 1, 2, 3, 4}, epoch, batch);
    const float* p = batch.images.data<float>();
    return std::vector<float>(p, p + batch.images.numel());
  };
  const std::vector<float> one_worker = run(1, 0);
  EXPECT_EQ(run(3, 0), one_worker) << "the crops must not depend on which worker decodes";
  EXPECT_NE(run(1, 1), one_worker) << "another epoch draws other crops";
}

TEST(EncodedImages, ImageFolderLabelsFollowTheSortedClassFolders) {
  TempDir dir;
  const std::vector<std::string> classes = {"dog", "cat", "zebra"};  // sorted: cat 0, dog 1, zebra 2
  const std::vector<int> reds = {10, 120, 250};
  for (std::size_t c = 0; c < classes.size(); ++c) {
    std::filesystem::create_directories(dir.file(classes[c]));
    const Bytes rgb = sdp::testing::make_pixels(20, 24, 3, [&](int, int, int ch) { return ch == 0 ? reds[c] : 50; });
    sdp::testing::write_raw(dir.file(classes[c] + "/a.png"), sdp::testing::encode_png_rgb(rgb, 20, 24));
  }
  EncodedImageSet set(open_image_folder_source(dir.str()), small_images(/*num_classes=*/0));
  EXPECT_EQ(set.num_classes(), 3);  // the folder's own count
  Batch batch;
  set.make_assembler({})->assemble({0, 1, 2}, 0, batch);
  EXPECT_EQ(batch.labels, (std::vector<int32_t>{0, 1, 2}));
  const float* x = batch.images.data<float>();
  EXPECT_FLOAT_EQ(x[0 * 3 * 256], normalized(120));  // cat: PNG is lossless, a flat resize exact
  EXPECT_FLOAT_EQ(x[1 * 3 * 256], normalized(10));   // dog
  EXPECT_FLOAT_EQ(x[2 * 3 * 256], normalized(250));  // zebra
}

TEST(EncodedImages, ALoaderStepsThroughEveryRecordOncePerEpoch) {
  TempDir dir;
  write_shards(dir, 8);
  EncodedImageSet set(open_tfrecord_source(dir.file("train"), {}), small_images(9));
  LoaderOptions options;
  options.batch_size = 2;
  options.prefetch = 2;
  IndexedTrainLoader loader(set, options);
  loader.start_epoch(0);
  std::vector<int64_t> seen;
  while (const Batch* batch = loader.next()) {
    for (std::size_t k = 0; k < batch->indices.size(); ++k) {
      seen.push_back(batch->indices[k]);
      EXPECT_EQ(batch->labels[k], batch->indices[k] + 1);  // no label_offset here
    }
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(EncodedImages, BadSamplesNameTheirFileAndRecord) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("d"));
  TfRecordWriter writer(dir.file("d/s"));
  writer.write(encode_example(flat_jpeg(20, 20, 1, 2, 3), 0, "image/encoded", "image/class/label"));
  writer.write(encode_example(flat_jpeg(20, 20, 1, 2, 3), 5, "image/encoded", "image/class/label"));
  writer.write(encode_example(Bytes{'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'a', 'g', 'e'}, 1, "image/encoded",
                              "image/class/label"));
  writer.close();
  EncodedImageSet set(open_tfrecord_source(dir.file("d"), {}), small_images(3));
  auto assembler = set.make_assembler({});
  Batch batch;
  assembler->assemble({0}, 0, batch);  // a good one reads
  expect_input_error([&] { assembler->assemble({0, 1}, 0, batch); },
                     {dir.file("d/s"), "record 1 (from 0)", "label 5 is outside [0, 3)"});
  expect_input_error([&] { assembler->assemble({2}, 0, batch); }, {dir.file("d/s"), "record 2 (from 0)"});
}

// data.on_bad_record: skip: a bad sample's slot takes the batch's first good sample, the batch
// keeps its size, and the assembler counts it; a batch of bad samples only still fails.
TEST(EncodedImages, SkippingReplacesABadSampleByAGoodOneOfItsBatch) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("d"));
  TfRecordWriter writer(dir.file("d/s"));
  writer.write(encode_example(Bytes{'b', 'a', 'd'}, 1, "image/encoded", "image/class/label"));
  writer.write(encode_example(flat_jpeg(20, 20, 200, 100, 50), 2, "image/encoded", "image/class/label"));
  writer.write(encode_example(Bytes{'w', 'o', 'r', 's', 'e'}, 0, "image/encoded", "image/class/label"));
  writer.close();
  EncodedImageOptions options = small_images(3);
  options.skip_bad_records = true;
  EncodedImageSet set(open_tfrecord_source(dir.file("d"), {}), options);
  auto assembler = set.make_assembler({});
  Batch batch;
  assembler->assemble({0, 1}, 0, batch);
  ASSERT_EQ(batch.size(), 2);
  EXPECT_EQ(batch.labels, (std::vector<int32_t>{2, 2}));
  const float* x = batch.images.data<float>();
  EXPECT_TRUE(std::equal(x, x + 768, x + 768)) << "the bad slot holds a copy of the good sample";
  EXPECT_EQ(assembler->skipped(), 1);
  expect_input_error([&] { assembler->assemble({0, 2}, 0, batch); }, {"every sample of a batch of 2 was bad"});
}

TEST(EncodedImages, RefusesGzipShardsAndUnknownClassCounts) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("g"));
  {
    TfRecordWriter gz(dir.file("g/s"), /*gzip=*/true);
    gz.write(encode_example(flat_jpeg(8, 8, 1, 2, 3), 0, "image/encoded", "image/class/label"));
    gz.close();
  }
  expect_input_error([&] { open_tfrecord_source(dir.file("g"), {}); }, {dir.file("g/s"), "gunzip"});
  write_shards(dir, 2);
  expect_input_error([&] { EncodedImageSet(open_tfrecord_source(dir.file("train"), {}), small_images(0)); },
                     {"model.num_classes"});
}

}  // namespace
}  // namespace sdp
