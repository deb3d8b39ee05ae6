// SageMaker Pipe mode: a channel's FIFOs <channel>_0, _1, ... read by one reader per host, whose
// records are dealt round-robin to the host's ranks (here two PipeRecords of one process, local
// ranks 0 and 1, talking over the same abstract sockets two processes use).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "data/sets/pipe_channel.hpp"
#include "data/formats/tar_shards.hpp"
#include "data/formats/tf_example.hpp"
#include "data/formats/tfrecord.hpp"
#include "unit/data/expect_input_error.hpp"
#include "unit/data/temp_dir.hpp"

namespace sdp {
namespace {

using sdp::testing::expect_input_error;
using sdp::testing::TempDir;

// A TFRecord file of `n` Examples whose image bytes are the record's number and label n % 5.
std::string write_records(const TempDir& dir, int n) {
  const std::string path = dir.file("records.tfrecord");
  TfRecordWriter writer(path);
  for (int i = 0; i < n; ++i)
    writer.write(
        encode_example({static_cast<uint8_t>(i)}, i % 5, "image/encoded", "image/class/label"));
  writer.close();
  return path;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Writes `bytes` into FIFOs channel_0 .. channel_{passes-1}, one after the other, as SageMaker
// does.
std::thread feed(const std::string& channel, std::vector<uint8_t> bytes, int passes, int first = 0) {
  return std::thread([=] {
    for (int pass = first; pass < first + passes; ++pass) {
      const std::string fifo = pipe_fifo_path(channel, pass);
      ::mkfifo(fifo.c_str(), 0600);
      std::ofstream out(fifo, std::ios::binary);  // blocks until the reader opens it
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
    }
  });
}

PipeOptions options(const std::string& channel, int local_rank, int local_size, int host = 0,
                    int hosts = 1) {
  PipeOptions o;
  o.path = channel;
  o.local_rank = local_rank;
  o.local_size = local_size;
  o.host = host;
  o.hosts = hosts;
  o.token = "unit-" + std::to_string(::getpid());
  o.timeout_s = 20;
  return o;
}

std::vector<int64_t> read_pass(RankRecords& records, int64_t pass) {
  std::vector<int64_t> got;
  const auto reader = records.open_pass(pass);
  EncodedRecord r;
  while (reader->next(r)) {
    EXPECT_EQ(r.image, std::vector<uint8_t>{static_cast<uint8_t>(r.record)});
    EXPECT_EQ(r.label, r.record % 5);
    got.push_back(r.record);
  }
  return got;
}

// Reads pass 0 on local ranks 0 and 1 at once: both must fail with the same InputError, which
// names every one of `parts` (the host's reader raises its error on every rank of the host).
void expect_error_on_both_ranks(PipeRecords& rank0, PipeRecords& rank1, std::initializer_list<std::string> parts) {
  std::string other_error;
  std::thread other([&] {
    try {
      read_pass(rank1, 0);
    } catch (const InputError& e) {
      other_error = e.what();
    }
  });
  expect_input_error([&] { read_pass(rank0, 0); }, parts);
  other.join();
  for (const std::string& part : parts) EXPECT_NE(other_error.find(part), std::string::npos) << other_error;
}

TEST(PipeRecords, TheHostsReaderDealsEachPassToItsRanks) {
  TempDir dir;
  const std::string channel = dir.file("train");
  std::thread writer = feed(channel, read_file(write_records(dir, 9)), 2);
  PipeRecords rank1(options(channel, 1, 2));  // listens first, as a rank that starts early would
  PipeRecords rank0(options(channel, 0, 2));
  for (int64_t pass = 0; pass < 2; ++pass) {
    std::vector<int64_t> first, second;
    std::thread other([&] { second = read_pass(rank1, pass); });
    first = read_pass(rank0, pass);
    other.join();
    EXPECT_EQ(first, (std::vector<int64_t>{0, 2, 4, 6, 8})) << "pass " << pass;
    EXPECT_EQ(second, (std::vector<int64_t>{1, 3, 5, 7})) << "pass " << pass;
  }
  StreamedRecord named;
  named.pass = 1;
  named.record.record = 3;
  EXPECT_EQ(rank0.where(named), channel + "_1: record 3 (from 0)");
  writer.join();
}

TEST(PipeRecords, AFullyReplicatedChannelIsSplitOverTheHosts) {
  TempDir dir;
  const std::string channel = dir.file("train");
  std::thread writer = feed(channel, read_file(write_records(dir, 7)), 1);
  PipeRecords host1(options(channel, 0, 1, /*host=*/1, /*hosts=*/2));
  EXPECT_EQ(read_pass(host1, 0), (std::vector<int64_t>{1, 3, 5}));
  writer.join();
  PipeOptions sharded = options(dir.file("part"), 0, 1, 1, 2);
  sharded.host_sharded = true;  // ShardedByS3Key: this host's FIFO is its own part, kept whole
  std::thread part_writer = feed(sharded.path, read_file(write_records(dir, 4)), 1);
  PipeRecords part(sharded);
  EXPECT_EQ(read_pass(part, 0), (std::vector<int64_t>{0, 1, 2, 3}));
  part_writer.join();
}

TEST(PipeRecords, AStreamThatEndsInsideARecordIsAnErrorOnEveryRankOfTheHost) {
  TempDir dir;
  const std::string channel = dir.file("train");
  std::vector<uint8_t> bytes = read_file(write_records(dir, 4));
  bytes.resize(bytes.size() - 3);
  std::thread writer = feed(channel, bytes, 1);
  PipeRecords rank1(options(channel, 1, 2));
  PipeRecords rank0(options(channel, 0, 2));
  expect_error_on_both_ranks(rank0, rank1, {channel + "_0: record 3 (from 0)", "truncated"});
  writer.join();
}

// Tar shards in Pipe mode: the channel's archives arrive back to back (here two shards of 3
// and 4 samples), and the host's reader deals the samples, label and image, as it deals records.
TEST(PipeRecords, TarShardsArriveBackToBackAndAreDealtAsSamples) {
  TempDir dir;
  std::vector<uint8_t> channel_bytes;
  int next = 0;
  for (int shard = 0; shard < 2; ++shard) {
    const std::string path = dir.file("shard" + std::to_string(shard) + ".tar");
    TarWriter tar(path);
    for (int i = 0; i < 3 + shard; ++i, ++next) {
      const std::string key = "s" + std::to_string(next);
      tar.add_file(key + ".jpg", {static_cast<uint8_t>(next)});
      const std::string label = std::to_string(next % 5);
      tar.add_file(key + ".cls", std::vector<uint8_t>(label.begin(), label.end()));
    }
    tar.close();
    const std::vector<uint8_t> bytes = read_file(path);
    channel_bytes.insert(channel_bytes.end(), bytes.begin(), bytes.end());
  }
  const std::string channel = dir.file("train");
  std::thread writer = feed(channel, channel_bytes, 1);
  PipeOptions o0 = options(channel, 0, 2), o1 = options(channel, 1, 2);
  o0.records.format = o1.records.format = StreamFormat::kTarShards;
  PipeRecords rank1(o1);
  PipeRecords rank0(o0);
  std::vector<int64_t> second;
  std::thread other([&] { second = read_pass(rank1, 0); });
  EXPECT_EQ(read_pass(rank0, 0), (std::vector<int64_t>{0, 2, 4, 6}));
  other.join();
  EXPECT_EQ(second, (std::vector<int64_t>{1, 3, 5}));
  writer.join();
}

// A tar sample without its label in a FIFO: an error naming the FIFO, the record and its key,
// on both ranks of the host.
TEST(PipeRecords, ATarSampleWithoutItsLabelIsAnErrorOnEveryRankOfTheHost) {
  TempDir dir;
  const std::string path = dir.file("bad.tar");
  {
    TarWriter tar(path);
    tar.add_file("s0.jpg", {0});
    tar.add_file("s0.cls", {'0'});
    tar.add_file("s1.jpg", {1});  // no s1.cls
    tar.close();
  }
  const std::string channel = dir.file("train");
  std::thread writer = feed(channel, read_file(path), 1);
  PipeOptions o0 = options(channel, 0, 2), o1 = options(channel, 1, 2);
  o0.records.format = o1.records.format = StreamFormat::kTarShards;
  PipeRecords rank1(o1);
  PipeRecords rank0(o0);
  expect_error_on_both_ranks(rank0, rank1, {channel + "_0: record 1 (from 0) (key 's1')", "no .cls member"});
  writer.join();
}

// An evaluation reads one FIFO, the one after the last evaluation's: its reader starts there
// and stops after it.
TEST(PipeRecords, AnEvaluationReadsOneFifoFromItsPass) {
  TempDir dir;
  const std::string channel = dir.file("test");
  std::thread writer = feed(channel, read_file(write_records(dir, 5)), 1, /*first=*/1);
  PipeOptions o = options(channel, 0, 1);
  o.first_pass = 1;
  o.passes = 1;
  PipeRecords records(o);
  EXPECT_EQ(read_pass(records, 1), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  writer.join();
  // The next pass is not read: the host's reader ended with the last one, and says so.
  EXPECT_THROW(read_pass(records, 2), RuntimeError);
}

TEST(PipeRecords, DestroyedWhileWaitingForAFifoWithoutHanging) {
  TempDir dir;
  const std::string channel = dir.file("train");
  ::mkfifo(pipe_fifo_path(channel, 0).c_str(), 0600);  // made, but no writer ever opens it
  PipeRecords rank0(options(channel, 0, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the feeder is in its open()
}

}  // namespace
}  // namespace sdp
