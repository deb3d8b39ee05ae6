// ShardedSampler: which samples each rank reads at each step.
//
// Contract (all ranks): every epoch is one permutation of [0, N) computed from
// (seed, epoch) alone, identical on every rank and every standard library. Training
// walks that permutation in global batches of accumulate * world * batch positions, one per
// optimizer step; micro-batch m of rank r is the (m * world + r)-th block of `batch`
// positions of it. So shards are disjoint, all ranks run the same number of steps, and a
// global batch is a contiguous range of the permutation, independent of how it is split over
// ranks and micro-batches (2 ranks x 4 micro-batches read the samples of 8 ranks x 1).
//
// Progress is a SampleCursor (epoch, samples of that epoch consumed by all ranks
// together), not a per-rank position: a job checkpointed at a cursor resumes on any
// world size and reads exactly the permutation positions that were not read yet; with
// the same global batch size it even sees the same global batches.
#pragma once

#include <cstdint>
#include <vector>

namespace sdp {

// The permutation of [0, n) for (seed, epoch): mt19937_64 + our own Fisher-Yates.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

struct SampleCursor {
  int64_t epoch = 0;
  int64_t offset = 0;  // permutation positions of `epoch` already consumed globally
  bool operator==(const SampleCursor& o) const { return epoch == o.epoch && offset == o.offset; }
};

// Where global step `global_step` (counted from epoch 0) starts, in epochs of
// `steps_per_epoch` steps of `global_batch` samples: what both train loaders resume from.
SampleCursor cursor_at_step(int64_t global_step, int64_t steps_per_epoch, int64_t global_batch);

class ShardedSampler {
 public:
  // Throws InputError when there is not even one global batch (n < accumulate * world * batch).
  ShardedSampler(int64_t n, uint64_t seed, int rank, int world, int64_t batch, int accumulate = 1);

  int64_t size() const { return n_; }
  int rank() const { return rank_; }
  int world() const { return world_; }
  int64_t batch() const { return batch_; }
  int accumulate() const { return accumulate_; }
  // Samples of one optimizer step over all ranks and micro-batches.
  int64_t global_batch() const { return int64_t{accumulate_} * world_ * batch_; }

  // Full steps of an epoch started from its beginning; the tail of fewer than
  // global_batch() samples is dropped (a different tail each epoch, since it is shuffled).
  int64_t steps_per_epoch() const { return usable_ / global_batch(); }
  // At most `steps` steps per epoch (1 <= steps), so that hosts reading sets of different
  // sizes (data.shard: host) run the same number: each epoch uses the first steps x global batch
  // positions of its permutation.
  void limit_steps_per_epoch(int64_t steps);
  // Full steps left in the epoch of `at`.
  int64_t steps_left(const SampleCursor& at) const;

  // This rank's `batch` sample indices of micro-batch `micro` (0 .. accumulate - 1) of the
  // global batch starting at `at`.
  // Not thread-safe (caches the permutation of the last epoch asked for).
  void batch_indices(const SampleCursor& at, int micro, std::vector<int64_t>& out) const;
  // This rank's samples of step `step` of `epoch`: its micro-batches one after the other.
  std::vector<int64_t> batch_indices(int64_t epoch, int64_t step) const;

  // The cursor after the global batch starting at `at`; the first position of the
  // next epoch once no full global batch is left.
  SampleCursor advance(const SampleCursor& at) const;
  // A cursor given as a count of global samples since epoch 0 (N per epoch is NOT
  // assumed: each epoch contributes steps_per_epoch * global_batch samples).
  SampleCursor cursor_at_step(int64_t global_step) const;

  const std::vector<int64_t>& permutation(int64_t epoch) const;

 private:
  int64_t n_;
  int64_t usable_;  // permutation positions an epoch uses: n, or fewer under a step limit
  uint64_t seed_;
  int rank_, world_;
  int64_t batch_;
  int accumulate_;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> cached_perm_;
};

// Evaluation order: every sample once, no shuffle, rank r takes r, r + world, ...
// (ranks may get one sample more than others; combine the counts after the loop).
std::vector<int64_t> eval_indices(int64_t n, int rank, int world);

}  // namespace sdp
