// CTR samples streamed (data.load: stream): the LibSVM and sample-layout TFRecord shard readers
// give the in-memory readers' rows, bad lines are named or skipped, the count index is keyed by
// what decides a sample, and a training stream started at step k hands out what a stream run
// from step 0 hands out from step k on (bitwise resume).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ctr/ctr_stream.hpp"
#include "data/formats/ctr_tfrecord.hpp"
#include "data/formats/libsvm.hpp"
#include "data/loading/record_stream.hpp"
#include "data/sets/stream_source.hpp"
#include "unit/data/expect_input_error.hpp"
#include "unit/data/temp_dir.hpp"

namespace sdp {
namespace {

using sdp::testing::expect_input_error;
using sdp::testing::TempDir;

constexpr int kFields = 3;

StreamSourceOptions libsvm_options(bool skip = false) {
  StreamSourceOptions o;
  o.format = StreamFormat::kLibsvm;
  o.ctr.fields = kFields;
  o.ctr.table_rows = 1000;
  o.ctr.skip_bad = skip;
  return o;
}

void write_text(const std::string& path, const std::string& text) {
  testing::write_raw(path, std::vector<uint8_t>(text.begin(), text.end()));
}

// Lines i = first .. first + n - 1: label i % 2, ids (i, i + 1, i + 2) % 1000, values 1, 0.5, i.
std::string lines(int first, int n) {
  std::string text;
  for (int i = first; i < first + n; ++i)
    text += std::to_string(i % 2) + " " + std::to_string(i % 1000) + ":1 " + std::to_string((i + 1) % 1000) +
            ":0.5 " + std::to_string((i + 2) % 1000) + ":" + std::to_string(i) + "\n";
  return text;
}

// Every record of a shard, unpacked into rows.
CtrRecords read_shard(const std::string& path, const StreamSourceOptions& o) {
  CtrRecords rows;
  rows.fields = kFields;
  EncodedRecord record;
  std::vector<int64_t> ids(kFields);
  std::vector<float> values(kFields);
  for (auto reader = open_stream_shard(path, 0, o); reader->next(record);) {
    unpack_ctr_row(record.image, kFields, ids.data(), values.data());
    rows.ids.insert(rows.ids.end(), ids.begin(), ids.end());
    rows.values.insert(rows.values.end(), values.begin(), values.end());
    rows.labels.push_back(static_cast<float>(record.label));
  }
  return rows;
}

void expect_same_rows(const CtrRecords& a, const CtrRecords& b) {
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_EQ(a.values, b.values);
}

TEST(CtrStream, ShardReadersGiveTheInMemoryRows) {
  TempDir dir;
  // A short row (padded) and a -1 label among them.
  const std::string text = lines(0, 50) + "-1 7:2\n" + lines(50, 10);
  write_text(dir.file("a.svm"), text);
  testing::write_gz(dir.file("b.svm.gz"), std::vector<uint8_t>(text.begin(), text.end()));
  CtrRecords expected;
  read_libsvm(dir.file("a.svm"), libsvm_options().ctr, expected);
  ASSERT_EQ(expected.size(), 61);
  expect_same_rows(read_shard(dir.file("a.svm"), libsvm_options()), expected);
  expect_same_rows(read_shard(dir.file("b.svm.gz"), libsvm_options()), expected);
  // The sample's TFRecord layout, through its own reader.
  StreamSourceOptions tf = libsvm_options();
  tf.format = StreamFormat::kCtrTfRecord;
  write_ctr_tfrecord(expected, dir.file("c.tfrecord"), /*gzip=*/true);
  expect_same_rows(read_shard(dir.file("c.tfrecord"), tf), expected);
}

TEST(CtrStream, BadLinesAreNamedOrSkipped) {
  TempDir dir;
  write_text(dir.file("bad.svm"), lines(0, 3) + "1 4:x\n" + lines(3, 2) + "0 1:1 2:1 3:1 4:1\n");
  expect_input_error([&] { read_shard(dir.file("bad.svm"), libsvm_options()); }, {"bad.svm:4:", "value"});
  const CtrRecords kept = read_shard(dir.file("bad.svm"), libsvm_options(/*skip=*/true));
  EXPECT_EQ(kept.size(), 5);  // the bad value and the row of 4 pairs (3 fields) skipped
  write_text(dir.file("big.svm"), "1 1:1 5000:1\n");
  expect_input_error([&] { read_shard(dir.file("big.svm"), libsvm_options()); }, {"big.svm:1:", "model.table_rows"});
}

TEST(CtrStream, CountIndexIsKeyedByWhatDecidesASample) {
  TempDir dir;
  write_text(dir.file("a.svm"), lines(0, 20) + "1 4:x\n");
  const StreamSourceOptions skip = libsvm_options(/*skip=*/true);
  EXPECT_EQ(count_stream_samples(dir.file("a.svm"), skip), 20);
  ASSERT_TRUE(std::filesystem::exists(dir.file("a.svm.idx")));
  EXPECT_EQ(count_stream_samples(dir.file("a.svm"), skip), 20);  // from the index
  // Counted under abort, the index of the skipping run is not taken: the bad line is an error.
  expect_input_error([&] { count_stream_samples(dir.file("a.svm"), libsvm_options()); }, {"a.svm:21:"});
  // The index is not listed as a data file of the directory.
  const StreamSource source(dir.str(), skip);
  EXPECT_EQ(source.num_shards(), 1);
  EXPECT_EQ(source.total(), 20);
}

TEST(CtrStream, PackedRowsRoundTripAndRefuseAnotherWidth) {
  const int64_t ids[3] = {1, -2, int64_t{1} << 40};
  const float values[3] = {0.5f, -1.0f, 3e38f};
  std::vector<uint8_t> bytes;
  pack_ctr_row(ids, values, 3, bytes);
  int64_t ids_back[3];
  float values_back[3];
  unpack_ctr_row(bytes, 3, ids_back, values_back);
  EXPECT_EQ(std::vector<int64_t>(ids_back, ids_back + 3), std::vector<int64_t>(ids, ids + 3));
  EXPECT_EQ(std::vector<float>(values_back, values_back + 3), std::vector<float>(values, values + 3));
  EXPECT_THROW(unpack_ctr_row(bytes, 2, ids_back, values_back), std::logic_error);
}

// Batches of `stream` from its current position: labels and sample ids, step by step.
std::vector<std::vector<int64_t>> batches(CtrTrainStream& stream, int steps, int64_t batch) {
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> ids(static_cast<size_t>(batch * kFields)), samples(static_cast<size_t>(batch));
  std::vector<float> values(ids.size()), labels(samples.size());
  for (int s = 0; s < steps; ++s) {
    stream.next(ids.data(), values.data(), labels.data(), samples.data());
    std::vector<int64_t> step = samples;
    step.insert(step.end(), ids.begin(), ids.end());
    out.push_back(step);
  }
  return out;
}

TEST(CtrStream, StartingAtAStepContinuesTheUninterruptedStream) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("train"));
  // Three files of unequal sizes, so that ranks' shares and passes end at odd places.
  write_text(dir.file("train/0.svm"), lines(0, 37));
  write_text(dir.file("train/1.svm"), lines(37, 20));
  write_text(dir.file("train/2.svm"), lines(57, 29));
  const auto source = std::make_shared<StreamSource>(dir.file("train"), libsvm_options());
  ASSERT_EQ(source->total(), 86);
  const int64_t batch = 8;
  for (int world : {1, 2, 4}) {
    for (int rank = 0; rank < world; ++rank) {
      auto records = [&] { return std::make_shared<ShardRecords>(source, 5, rank, world, /*shuffle_shards=*/true); };
      CtrTrainStream straight(records(), kFields, batch, 5, rank, /*shuffle_buffer=*/16);
      straight.start(0);
      const auto all = batches(straight, 30, batch);  // several passes of every share
      for (int k : {3, 11, 22}) {
        CtrTrainStream resumed(records(), kFields, batch, 5, rank, 16);
        resumed.start(k);
        const auto rest = batches(resumed, 30 - k, batch);
        for (int s = k; s < 30; ++s)
          ASSERT_EQ(rest[static_cast<size_t>(s - k)], all[static_cast<size_t>(s)])
              << "world " << world << " rank " << rank << ": started at step " << k << ", step " << s;
      }
    }
  }
}

TEST(CtrStream, EvaluationReadsEachRanksShareOncePerPass) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("test"));
  write_text(dir.file("test/0.svm"), lines(0, 13));
  write_text(dir.file("test/1.svm"), lines(13, 9));
  const auto source = std::make_shared<StreamSource>(dir.file("test"), libsvm_options());
  for (int world : {1, 2, 3}) {
    std::multiset<int64_t> seen;
    for (int rank = 0; rank < world; ++rank)
      for_each_ctr_batch(std::make_shared<ShardRecords>(source, 0, rank, world, false), 0, kFields, 4,
                         [&](int64_t n, const int64_t* ids, const float*, const float*) {
                           EXPECT_LE(n, 4);
                           for (int64_t i = 0; i < n; ++i) seen.insert(ids[i * kFields]);
                         });
    std::multiset<int64_t> every;
    for (int i = 0; i < 22; ++i) every.insert(i);
    EXPECT_EQ(seen, every) << "world " << world;
  }
}

}  // namespace
}  // namespace sdp
