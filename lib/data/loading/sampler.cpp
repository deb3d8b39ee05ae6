#include "data/loading/sampler.hpp"

#include <algorithm>
#include <random>
#include <stdexcept>

#include "core/error.hpp"
#include "data/loading/random.hpp"

namespace sdp {

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> perm(n);
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  std::mt19937_64 rng(mix_keys(seed, random_stream::kSampleOrder, static_cast<uint64_t>(epoch)));
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = static_cast<int64_t>(uniform_below(rng, static_cast<uint64_t>(i) + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

ShardedSampler::ShardedSampler(int64_t n, uint64_t seed, int rank, int world, int64_t batch,
                               int accumulate)
    : n_(n), usable_(n), seed_(seed), rank_(rank), world_(world), batch_(batch), accumulate_(accumulate) {
  if (world < 1 || rank < 0 || rank >= world)
    throw InputError("sampler: rank " + std::to_string(rank) + " outside world size " +
                     std::to_string(world));
  if (batch < 1) throw InputError("sampler: batch size must be >= 1, got " + std::to_string(batch));
  if (accumulate < 1)
    throw InputError("sampler: micro-batches per step must be >= 1, got " +
                     std::to_string(accumulate));
  if (n < global_batch())
    throw InputError(
        "sampler: " + std::to_string(n) + " samples are fewer than one global batch (" +
        std::to_string(world) + " ranks x " + std::to_string(batch) +
        (accumulate > 1 ? " x " + std::to_string(accumulate) + " micro-batches" : "") + ")");
}

int64_t ShardedSampler::steps_left(const SampleCursor& at) const {
  return at.offset >= usable_ ? 0 : (usable_ - at.offset) / global_batch();
}

void ShardedSampler::limit_steps_per_epoch(int64_t steps) {
  if (steps < 1) throw std::invalid_argument("sampler: a step limit must be >= 1");
  usable_ = std::min(n_, steps * global_batch());
}

const std::vector<int64_t>& ShardedSampler::permutation(int64_t epoch) const {
  if (epoch != cached_epoch_) {
    cached_perm_ = epoch_permutation(n_, seed_, epoch);
    cached_epoch_ = epoch;
  }
  return cached_perm_;
}

void ShardedSampler::batch_indices(const SampleCursor& at, int micro,
                                   std::vector<int64_t>& out) const {
  if (at.offset < 0 || steps_left(at) < 1)
    throw std::out_of_range("sampler: no full global batch left at epoch " +
                            std::to_string(at.epoch) + " offset " + std::to_string(at.offset));
  if (micro < 0 || micro >= accumulate_)
    throw std::out_of_range("sampler: no micro-batch " + std::to_string(micro) + " in a step of " +
                            std::to_string(accumulate_));
  const std::vector<int64_t>& perm = permutation(at.epoch);
  const int64_t begin = at.offset + (int64_t{micro} * world_ + rank_) * batch_;
  out.assign(perm.begin() + begin, perm.begin() + begin + batch_);
}

std::vector<int64_t> ShardedSampler::batch_indices(int64_t epoch, int64_t step) const {
  std::vector<int64_t> out, micro_batch;
  for (int micro = 0; micro < accumulate_; ++micro) {
    batch_indices(SampleCursor{epoch, step * global_batch()}, micro, micro_batch);
    out.insert(out.end(), micro_batch.begin(), micro_batch.end());
  }
  return out;
}

SampleCursor ShardedSampler::advance(const SampleCursor& at) const {
  SampleCursor next{at.epoch, at.offset + global_batch()};
  if (steps_left(next) == 0) next = {at.epoch + 1, 0};
  return next;
}

SampleCursor cursor_at_step(int64_t global_step, int64_t steps_per_epoch, int64_t global_batch) {
  return {global_step / steps_per_epoch, (global_step % steps_per_epoch) * global_batch};
}

SampleCursor ShardedSampler::cursor_at_step(int64_t global_step) const {
  return sdp::cursor_at_step(global_step, steps_per_epoch(), global_batch());
}

std::vector<int64_t> eval_indices(int64_t n, int rank, int world) {
  std::vector<int64_t> out;
  out.reserve(n / world + 1);
  for (int64_t i = rank; i < n; i += world) out.push_back(i);
  return out;
}

}  // namespace sdp
