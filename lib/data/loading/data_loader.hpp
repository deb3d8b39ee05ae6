// Loaders: what the trainer and the evaluation read batches from, whatever the source
// (sample_set.hpp makes them). TrainLoader and EvalLoader are the interfaces; the indexed
// loaders below serve SampleSets, the streamed ones (stream_loader.hpp) the streamed sets.
//
// Indexed loaders: a SampleSet + an index order + its assembler behind a Prefetcher.
// IndexedTrainLoader walks one epoch of the ShardedSampler from a SampleCursor (the start of an
// epoch, or a resumed mid-epoch position) to the end of that epoch, one step after the other,
// each step as `accumulate` micro-batches (Batch::micro 0, 1, ...); each Batch carries the
// cursor of its step and the cursor after that step for checkpoints. IndexedEvalLoader reads every sample
// of the split once (this rank's share: r, r + world, ...), last partial batch included.
//
// The SampleSet (or Dataset) must outlive the loader. Loader methods are called from one thread;
// the worker thread is internal.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "data/images/augment.hpp"
#include "data/sets/dataset.hpp"
#include "data/loading/prefetcher.hpp"
#include "data/sets/sample_set.hpp"
#include "data/loading/sampler.hpp"

namespace sdp {

struct LoaderOptions {
  int64_t batch_size = 64;  // per rank and micro-batch
  int accumulate = 1;       // micro-batches per step (train.accumulate_steps)
  uint64_t seed = 42;       // keys the shuffle and the augmentation
  int rank = 0;
  int world = 1;
  int prefetch = 2;        // batches prepared ahead; 0 = synchronous
  AugmentOptions augment;  // augment.seed is ignored: `seed` is used
  bool pinned = false;     // images in page-locked memory, for a GPU model (core/device_memory.hpp)

  // `augment` keyed by `seed`.
  AugmentOptions seeded_augment() const {
    AugmentOptions a = augment;
    a.seed = seed;
    return a;
  }
};

// What both train loaders count as they produce: the steps one start() may make (the rest of
// the epoch, or fewer) and which micro-batch of which step comes next.
class StepCounter {
 public:
  explicit StepCounter(int accumulate) : accumulate_(accumulate) {}
  // A new start(): at most min(steps_left, max_steps) steps (max_steps < 0: no cap).
  void start(int64_t steps_left, int64_t max_steps) {
    produced_ = 0;
    micro_ = 0;
    limit_ = max_steps >= 0 ? std::min(steps_left, max_steps) : steps_left;
  }
  bool done() const { return produced_ >= limit_; }
  // Stamps the batch's step and micro-batch and moves on; true when it ended a step.
  bool stamp(Batch& batch) {
    batch.step = produced_;
    batch.micro = micro_;
    if (++micro_ < accumulate_) return false;
    micro_ = 0;
    ++produced_;
    return true;
  }
  int micro() const { return micro_; }

 private:
  int accumulate_;
  int64_t produced_ = 0, limit_ = 0;  // steps
  int micro_ = 0;                     // the next micro-batch of step `produced_`
};

// Training batches of one rank: steps of `accumulate` micro-batches, epoch after epoch.
class TrainLoader {
 public:
  virtual ~TrainLoader() = default;
  // Steps of an epoch started from its beginning: the same on every rank.
  virtual int64_t steps_per_epoch() const = 0;
  // Full steps left in the epoch of `at`.
  virtual int64_t steps_left(const SampleCursor& at) const = 0;
  // Caps the steps of every epoch at `steps` (>= 1): ranks whose sets differ in size (one set
  // per host, data.shard: host) agree on the smallest. Before the first start().
  virtual void limit_steps_per_epoch(int64_t steps) = 0;
  // Starts iterating at `from` until the end of its epoch, or after `max_steps` steps
  // (of `accumulate` micro-batches each) when >= 0. Any iteration in progress is abandoned.
  virtual void start(const SampleCursor& from, int64_t max_steps = -1) = 0;
  void start_epoch(int64_t epoch) { start(SampleCursor{epoch, 0}); }
  // The next micro-batch (valid until the next call), or nullptr at the end (always after
  // the last micro-batch of a step). Each Batch carries its step's cursor and the next one.
  virtual const Batch* next() = 0;
  // Seconds next() waited for batches since start() (a data stall).
  virtual double wait_seconds() const = 0;
  // Bad samples replaced so far (data.on_bad_record: skip); read between iterations.
  virtual int64_t skipped_samples() const = 0;
  // With a JPEG offload (data.decode: gpu): images it refused, decoded on the CPU, so far.
  virtual int64_t cpu_decoded_samples() const { return 0; }
};

// Evaluation batches of one rank: its share of the set, every sample of the set read once over
// all ranks, the last batch partial (ranks may hold different counts: combine after the loop).
class EvalLoader {
 public:
  virtual ~EvalLoader() = default;
  virtual void start() = 0;
  virtual const Batch* next() = 0;
};

class IndexedTrainLoader final : public TrainLoader {
 public:
  IndexedTrainLoader(const SampleSet& samples, const LoaderOptions& options);
  IndexedTrainLoader(const Dataset& dataset, const LoaderOptions& options)
      : IndexedTrainLoader(DatasetSamples::view(dataset), options) {}

  // While an iteration runs, use only the size/step queries: batch_indices() and
  // permutation() share a cache with the worker thread.
  const ShardedSampler& sampler() const { return sampler_; }
  int64_t steps_per_epoch() const override { return sampler_.steps_per_epoch(); }
  int64_t steps_left(const SampleCursor& at) const override { return sampler_.steps_left(at); }
  void limit_steps_per_epoch(int64_t steps) override { sampler_.limit_steps_per_epoch(steps); }

  void start(const SampleCursor& from, int64_t max_steps = -1) override;
  const Batch* next() override { return prefetcher_.next(); }
  double wait_seconds() const override { return prefetcher_.wait_seconds(); }
  int64_t skipped_samples() const override { return assembler_->skipped(); }
  int64_t cpu_decoded_samples() const override { return assembler_->cpu_decoded(); }

 private:
  bool produce(Batch& batch);

  std::unique_ptr<SampleAssembler> assembler_;
  ShardedSampler sampler_;
  bool pinned_;
  // Worker-side iteration state; written by start() only while no worker runs.
  SampleCursor cursor_;
  StepCounter steps_;
  std::vector<int64_t> indices_;
  Prefetcher prefetcher_;  // last: destroyed (joined) before the state it uses
};

class IndexedEvalLoader final : public EvalLoader {
 public:
  IndexedEvalLoader(const SampleSet& samples, int64_t batch_size, int rank = 0, int world = 1, int prefetch = 2);
  IndexedEvalLoader(const Dataset& dataset, int64_t batch_size, int rank = 0, int world = 1, int prefetch = 2)
      : IndexedEvalLoader(DatasetSamples::view(dataset), batch_size, rank, world, prefetch) {}

  int64_t num_samples() const { return static_cast<int64_t>(order_.size()); }  // this rank
  int64_t num_batches() const { return (num_samples() + batch_size_ - 1) / batch_size_; }

  void start() override;
  const Batch* next() override { return prefetcher_.next(); }

 private:
  bool produce(Batch& batch);

  std::unique_ptr<SampleAssembler> assembler_;
  int64_t batch_size_;
  std::vector<int64_t> order_;
  int64_t position_ = 0, produced_ = 0;
  std::vector<int64_t> indices_;
  Prefetcher prefetcher_;
};

}  // namespace sdp
