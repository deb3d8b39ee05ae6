// `data convert`: an in-memory set written as JPEGs reads back with the same labels, in the
// same order (tfrecord shards round-robin, image folders by class) and nearly the same pixels.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "data/formats/ctr_tfrecord.hpp"
#include "data/formats/libsvm.hpp"
#include "data/tools/convert.hpp"
#include "data/sets/encoded_images.hpp"
#include "data/tools/inspect.hpp"
#include "data/sets/synthetic.hpp"
#include "unit/data/expect_input_error.hpp"
#include "unit/data/temp_dir.hpp"

namespace sdp {
namespace {

using sdp::testing::expect_input_error;
using sdp::testing::TempDir;

Dataset colour_set(int64_t count) {
  SyntheticSpec spec;
  spec.count = count;
  spec.channels = 3;
  spec.height = spec.width = 16;
  spec.noise = 0.0;  // smooth class patterns: JPEG keeps them closely
  return make_synthetic(spec, Split::kTrain);
}

EncodedImageOptions as_is(int num_classes) {  // the evaluation transform at the stored size
  EncodedImageOptions options;
  options.image_size = options.resize = 16;
  options.num_classes = num_classes;
  options.normalization = {{0, 0, 0}, {1, 1, 1}};  // x / 255
  return options;
}

TEST(Convert, TfRecordShardsReadBackWithTheirLabelsAndPixels) {
  TempDir dir;
  const Dataset d = colour_set(30);
  ConvertOptions options;
  options.output = dir.file("tf");
  options.shards = 3;
  const ConvertResult result = convert_dataset(d, options);
  EXPECT_EQ(result.samples, 30);
  EXPECT_EQ(result.files, 3);
  EXPECT_TRUE(std::filesystem::exists(dir.file("tf/train-00002-of-00003.idx"))) << "index files are written";
  EncodedImageSet set(open_tfrecord_source(dir.file("tf"), {}), as_is(10));
  ASSERT_EQ(set.count(), 30);
  // Shard s holds samples s, s + 3, ...: record k of the set is sample 3 (k % 10) + k / 10.
  std::vector<int64_t> all(30);
  for (int64_t k = 0; k < 30; ++k) all[k] = k;
  Batch batch;
  set.make_assembler({})->assemble(all, 0, batch);
  // Mean absolute error of record k against sample j: JPEG's own (sharp pattern edges, 4:2:0
  // chroma) is what the right sample shows; every sample of another class shows more.
  auto mean_error = [&](int64_t k, int64_t j) {
    double sum = 0;
    for (int64_t p = 0; p < 768; ++p) sum += std::fabs(batch.images.data<float>()[k * 768 + p] * 255.0 - d.image(j)[p]);
    return sum / 768;
  };
  for (int64_t k = 0; k < 30; ++k) {
    const int64_t sample = 3 * (k % 10) + k / 10;
    EXPECT_EQ(batch.labels[k], d.labels[sample]) << k;
    EXPECT_LT(mean_error(k, sample), 20) << "record " << k;
    for (int64_t j = 0; j < 30; ++j)
      if (d.labels[j] != d.labels[sample]) EXPECT_GT(mean_error(k, j), mean_error(k, sample)) << k << " vs " << j;
  }
}

TEST(Convert, ImageFolderNamesClassFoldersByLabelAndTarShardsCarryCls) {
  TempDir dir;
  const Dataset d = colour_set(40);
  ConvertOptions folder;
  folder.output = dir.file("folder");
  folder.format = "image-folder";
  convert_dataset(d, folder);
  EncodedImageSet set(open_image_folder_source(dir.file("folder")), as_is(0));
  EXPECT_EQ(set.num_classes(), 10);
  EXPECT_EQ(set.count(), 40);
  ConvertOptions tar;
  tar.output = dir.file("tar");
  tar.format = "tar-shards";
  tar.shards = 2;
  tar.limit = 25;
  convert_dataset(d, tar);
  const DataInspection inspection = inspect_data(dir.file("tar"), {});
  EXPECT_EQ(inspection.records, 25);
  EXPECT_TRUE(inspection.bad_message.empty()) << inspection.bad_message;
  int64_t labelled = 0;
  for (const auto& [label, n] : inspection.labels) labelled += n;
  EXPECT_EQ(labelled, 25);
}

TEST(Convert, RejectsBadOptions) {
  TempDir dir;
  const Dataset d = colour_set(4);
  ConvertOptions options;
  options.output = dir.file("x");
  options.format = "csv";
  expect_input_error([&] { convert_dataset(d, options); }, {"csv"});
  options.format = "tfrecord";
  options.quality = 0;
  expect_input_error([&] { convert_dataset(d, options); }, {"--quality"});
}

// A LibSVM file as TFRecord shards of label, ids, values: sample i in shard i % shards, every
// row `fields` ids (the longest row unless --fields says more).
TEST(Convert, LibsvmToCtrTfrecordShards) {
  TempDir dir;
  const std::string input = dir.file("train.libsvm");
  std::ofstream(input) << "1 1:0.5 3:2\n-1 2:1\n\n0 5:1 6:1 9000000000:-1.5\n1 4:3\n+1\n";
  CtrRecords expected;
  CtrReadOptions read;
  read.fields = 3;
  read.table_rows = int64_t{1} << 40;
  read_libsvm(input, read, expected);

  ConvertOptions options;
  options.output = dir.file("out");
  options.shards = 2;
  const ConvertResult result = convert_libsvm(input, options);
  EXPECT_EQ(result.samples, 5);
  EXPECT_EQ(result.files, 2);
  EXPECT_EQ(result.fields, 3);  // the longest row
  EXPECT_EQ(result.padded, 4);
  CtrRecords shard[2];
  for (int s = 0; s < 2; ++s)
    read_ctr_tfrecord(dir.file("out/train-0000" + std::to_string(s) + "-of-00002"), read, shard[s]);
  ASSERT_EQ(shard[0].size(), 3);
  ASSERT_EQ(shard[1].size(), 2);
  for (int64_t i = 0; i < expected.size(); ++i) {
    const CtrRecords& in = shard[i % 2];
    const auto row = static_cast<std::size_t>(i / 2);
    EXPECT_EQ(in.labels[row], expected.labels[static_cast<std::size_t>(i)]);
    for (std::size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(in.ids[row * 3 + k], expected.ids[static_cast<std::size_t>(i) * 3 + k]);
      EXPECT_EQ(in.values[row * 3 + k], expected.values[static_cast<std::size_t>(i) * 3 + k]);
    }
  }

  options.output = dir.file("wide");
  options.shards = 1;
  options.fields = 5;
  options.limit = 2;
  const ConvertResult wide = convert_libsvm(input, options);
  EXPECT_EQ(wide.samples, 2);
  CtrRecords five;
  read.fields = 5;
  read_ctr_tfrecord(dir.file("wide/train-00000-of-00001"), read, five);
  EXPECT_EQ(five.ids, (std::vector<int64_t>{1, 3, 0, 0, 0, 2, 0, 0, 0, 0}));
}

TEST(Convert, LibsvmRejectsBadOptionsAndLines) {
  TempDir dir;
  const std::string input = dir.file("in.libsvm");
  std::ofstream(input) << "1 1:1 2:1\n0 1:1 2:x\n";
  ConvertOptions options;
  options.output = dir.file("out");
  expect_input_error([&] { convert_libsvm(input, options); }, {input + ":2: field 1 (the 2nd pair '2:x')"});
  std::ofstream(input) << "1 1:1 2:1\n0 1:1 2:1 3:1\n";
  options.fields = 2;
  expect_input_error([&] { convert_libsvm(input, options); },
                     {input + ":2: the line has 3 pairs, more than --fields 2", "raise --fields to at least 3"});
  options.fields = 0;
  options.format = "tar-shards";
  expect_input_error([&] { convert_libsvm(input, options); }, {"--from libsvm writes --format tfrecord"});
  options.format = "tfrecord";
  std::ofstream(input) << "1\n0\n";
  expect_input_error([&] { convert_libsvm(input, options); }, {"no id:value pair"});
  expect_input_error([&] { convert_libsvm(dir.file("absent"), options); }, {"absent"});
}

}  // namespace
}  // namespace sdp
