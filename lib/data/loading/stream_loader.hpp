// Streamed image sets: shards read in order (record_stream.hpp), shuffled through a bounded
// buffer, decoded on the loader's worker pool (encoded_images.hpp's BatchDecoder). A rank holds
// the shuffle buffer, a short queue and the batches in flight, whatever the set's size.
//
// Which rank reads what. A pass is one reading of the whole set by all ranks together. In pass p
// the shards are taken in the order of epoch_permutation(shards, seed, p); with at least as many
// shards as ranks, rank r reads the shards at positions r, r + world, ... of that order (tf.data's
// and WebDataset's file-level sharding, each shard read by one rank); with fewer, every rank reads
// every shard and keeps records k = r, r + world, ... of the pass. Each rank streams its passes
// one after the other, through a shuffle buffer of `shuffle_buffer` records seeded by (seed,
// pass, rank), drained at the end of each pass.
//
// Epochs. Ranks share the work by steps, not by passes: an epoch is total / global batch steps
// on every rank (the rest dropped, as the indexed loaders drop it), and each step takes the next
// batch * accumulate records of the rank's stream. Shards differ in size, so a rank may run into
// its next pass before an epoch ends, or finish a pass early; every sample is still read once per
// pass, and no rank waits for another.
//
// Resuming. A SampleCursor is a global step; the rank's stream position is that step times its
// records per step, found by walking the passes' shares (from the shard counts) and reading the
// records of the current pass up to that position again, without decoding them. On the same
// world size a resumed job reads, shuffles and augments exactly as an uninterrupted one; on
// another, the shares differ and it reads on from the same global step.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "data/loading/data_loader.hpp"
#include "data/sets/encoded_images.hpp"
#include "data/sets/record_stream.hpp"

namespace sdp {

// The records rank `rank` keeps in pass `pass` (see above). shuffle = false: the shards in name
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
  bool push(StreamedRecord&& record);  // false when stopped

  std::shared_ptr<RankRecords> records_;
  Options options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamedRecord> queue_;  // guarded by mu_
  bool done_ = true, stop_ = false;   // guarded by mu_
  std::exception_ptr error_;          // guarded by mu_
  std::thread reader_;
};

class StreamedImageSet final : public SampleSource {
 public:
  // Throws InputError when no class count is known or the image options are inconsistent.
  StreamedImageSet(std::shared_ptr<const StreamSource> source, const EncodedImageOptions& options,
                   int64_t shuffle_buffer);
  std::string name() const override { return source_->name(); }
  int64_t count() const override { return source_->total(); }
  int num_classes() const override { return options_.num_classes; }
  int channels() const override { return 3; }
  int height() const override { return options_.image_size; }
  int width() const override { return options_.image_size; }
  std::string describe() const override;
  std::unique_ptr<TrainLoader> make_train_loader(const LoaderOptions& options) const override;
  std::unique_ptr<EvalLoader> make_eval_loader(int64_t batch_size, int rank, int world,
                                               int prefetch) const override;

 private:
  std::shared_ptr<const StreamSource> source_;
  EncodedImageOptions options_;
  int64_t shuffle_buffer_;
};

class StreamTrainLoader final : public TrainLoader {
 public:
  // `samples_per_epoch`: the set's size, which makes the steps of an epoch. Throws InputError
  // when the set has not one global batch.
  StreamTrainLoader(std::shared_ptr<RankRecords> records, int64_t samples_per_epoch,
                    const EncodedImageOptions& images, const LoaderOptions& options,
                    int64_t shuffle_buffer);
  int64_t steps_per_epoch() const override { return steps_per_epoch_; }
  int64_t steps_left(const SampleCursor& at) const override;
  void limit_steps_per_epoch(int64_t steps) override {
    steps_per_epoch_ = std::min(steps_per_epoch_, steps);
  }
  void start(const SampleCursor& from, int64_t max_steps = -1) override;
  const Batch* next() override { return prefetcher_.next(); }
  double wait_seconds() const override { return prefetcher_.wait_seconds(); }
  int64_t skipped_samples() const override { return decoder_.skipped(); }

  int64_t global_batch() const { return global_batch_; }
  // Where this rank's stream stands after `records` of its records: (pass, records into it);
  // nullopt when the passes' sizes are not known (a pipe).
  std::optional<std::pair<int64_t, int64_t>> stream_position(int64_t records) const;

 private:
  bool produce(Batch& batch);
  SampleCursor cursor_of_step(int64_t global_step) const;

  std::shared_ptr<RankRecords> rank_records_;
  LoaderOptions options_;
  int64_t global_batch_, steps_per_epoch_;
  BatchDecoder decoder_;
  RecordStream stream_;
  int64_t stream_records_ = -1;  // records this rank's stream has handed out (-1: not started)
  // Worker-side iteration state; written by start() only while no worker runs.
  int64_t step_ = 0, produced_ = 0, limit_ = 0;
  int micro_ = 0;
  std::vector<StreamedRecord> records_;
  std::vector<int64_t> keys_;
  Prefetcher prefetcher_;  // last: destroyed (joined) before the state it uses
};

class StreamEvalLoader final : public EvalLoader {
 public:
  // `rank` keys nothing but the reader's name; `records` is this rank's share, read for one
  // pass, `pass` (a pipe's evaluations each read the next FIFO).
  StreamEvalLoader(std::shared_ptr<RankRecords> records, const EncodedImageOptions& images,
                   int64_t batch_size, int rank, int prefetch, int64_t pass = 0);
  int64_t num_samples() const { return samples_; }  // this rank; -1 when unknown (a pipe)
  void start() override;
  const Batch* next() override { return prefetcher_.next(); }

 private:
  bool produce(Batch& batch);

  std::shared_ptr<RankRecords> rank_records_;
  int64_t batch_size_, pass_, samples_;
  BatchDecoder decoder_;
  RecordStream stream_;
  int64_t produced_ = 0;
  std::vector<StreamedRecord> records_;
  std::vector<int64_t> keys_;
  Prefetcher prefetcher_;
};

}  // namespace sdp
