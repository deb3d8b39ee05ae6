// A rank's records of a streamed set: which it reads in each pass (its share of the shards, or
// what its host's pipe reader hands it), and the thread that reads them, pass after pass,
// through a shuffle buffer into a bounded queue for the loaders (stream_loader.hpp, where the
// whole scheme is described).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <thread>
#include <vector>

#include "core/bounded_queue.hpp"
#include "core/error.hpp"
#include "data/sets/stream_source.hpp"

namespace sdp {

// A rank's stream looks this many passes ahead for a record before calling its share empty.
constexpr int64_t kMaxEmptyPasses = 1000;
// A rank whose passes hold nothing, pass after pass, would wait for ever: this error ends it.
InputError no_records(int rank);

// The records rank `rank` keeps in pass `pass` (stream_loader.hpp says how). shuffle = false: the shards in name
// order (evaluation).
struct PassShare {
  std::vector<int> shards;  // read in this order
  int64_t stride = 1;       // of the records read, in order, keep those k with
  int64_t phase = 0;        //   k % stride == phase
  int64_t samples = 0;      // records kept
};
PassShare pass_share(const std::vector<int64_t>& shard_samples, uint64_t seed, int64_t pass,
                     int rank, int world, bool shuffle);

struct StreamedRecord {
  EncodedRecord record;
  int64_t pass = 0;
};

// The records one rank reads, pass after pass, in reading order (before the shuffle buffer):
// its share of the shards (ShardRecords, below), or what its host's reader of a pipe hands it
// (pipe_channel.hpp).
class RankRecords {
 public:
  virtual ~RankRecords() = default;
  // Pass `pass`'s records; the reader's next() returns false at the end of the pass. Passes are
  // opened in order, one at a time.
  virtual std::unique_ptr<ShardReader> open_pass(int64_t pass) = 0;
  // Records of pass `pass`, or -1 when they cannot be known before reading it (a pipe).
  virtual int64_t pass_samples(int64_t pass) const = 0;
  // A record's id, unique within a pass (Batch::indices), and its name in an error.
  virtual int64_t sample_id(const StreamedRecord& r) const = 0;
  virtual std::string where(const StreamedRecord& r) const = 0;
  // Augmentation keys are pass * key_stride + sample id: distinct for every (pass, sample).
  virtual int64_t key_stride() const = 0;
  // Releases a reader blocked in open_pass() or next() for good (the stream is stopping).
  virtual void cancel() {}
};

// A rank's share of a StreamSource's shards, pass by pass (pass_share).
class ShardRecords final : public RankRecords {
 public:
  ShardRecords(std::shared_ptr<const StreamSource> source, uint64_t seed, int rank, int world,
               bool shuffle_shards);
  std::unique_ptr<ShardReader> open_pass(int64_t pass) override;
  int64_t pass_samples(int64_t pass) const override;
  int64_t sample_id(const StreamedRecord& r) const override {
    return source_->first_id(r.record.shard) + r.record.record;
  }
  std::string where(const StreamedRecord& r) const override {
    return source_->where(r.record.shard, r.record.record);
  }
  int64_t key_stride() const override { return source_->total(); }

 private:
  std::shared_ptr<const StreamSource> source_;
  uint64_t seed_;
  int rank_, world_;
  bool shuffle_shards_;
};

// Where a rank's stream stands after `records` of its records: (pass, records into it), from
// the passes' shares; nullopt when their sizes are not known (a pipe). Throws no_records(rank)
// when the passes hold nothing.
std::optional<std::pair<int64_t, int64_t>> stream_position(const RankRecords& records, int64_t taken, int rank);

// A rank's records, pass after pass, read and shuffled on a thread of their own into a bounded
// queue. One consumer thread.
class RecordStream {
 public:
  struct Options {
    uint64_t seed = 42;
    int rank = 0;                // keys the shuffle buffer
    int64_t shuffle_buffer = 0;  // records; 0 or 1: no shuffling
    bool repeat = true;          // false: one pass, then next() returns false
    int64_t queue = 256;         // records read ahead of the consumer
  };
  RecordStream(std::shared_ptr<RankRecords> records, const Options& options);
  ~RecordStream();
  RecordStream(const RecordStream&) = delete;
  RecordStream& operator=(const RecordStream&) = delete;

  // Stops any reading in progress and starts at pass `pass`, after its first `skip` records
  // (as shuffled: those are read and dropped).
  void start(int64_t pass, int64_t skip);
  // The next record; false after the last pass (repeat = false). Rethrows the reader's error
  // (an InputError naming the shard and record) once the records before it are taken.
  bool next(StreamedRecord& out);
  void stop();

 private:
  void read(int64_t pass, int64_t skip);

  std::shared_ptr<RankRecords> records_;
  Options options_;
  BoundedQueue<StreamedRecord> queue_;  // the reader's end or error closes it
  std::thread reader_;
};

}  // namespace sdp
