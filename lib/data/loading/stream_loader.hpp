// Streamed image sets: shards read in order (sets/stream_source.hpp), shared out among the ranks
// and shuffled (record_stream.hpp), through a bounded
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
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "data/loading/data_loader.hpp"
#include "data/sets/encoded_images.hpp"
#include "data/loading/record_stream.hpp"
#include "data/sets/stream_source.hpp"

namespace sdp {

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
  int64_t cpu_decoded_samples() const override { return decoder_.cpu_decoded(); }

  int64_t global_batch() const { return global_batch_; }
  // Where this rank's stream stands after `records` of its records: (pass, records into it);
  // nullopt when the passes' sizes are not known (a pipe).
  std::optional<std::pair<int64_t, int64_t>> stream_position(int64_t records) const;

 private:
  bool produce(Batch& batch);

  std::shared_ptr<RankRecords> rank_records_;
  LoaderOptions options_;
  int64_t global_batch_, steps_per_epoch_;
  BatchDecoder decoder_;
  RecordStream stream_;
  int64_t stream_records_ = -1;  // records this rank's stream has handed out (-1: not started)
  // Worker-side iteration state; written by start() only while no worker runs.
  int64_t step_ = 0;  // the global step being produced
  StepCounter steps_;
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
