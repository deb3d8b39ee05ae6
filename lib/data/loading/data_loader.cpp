#include "data/loading/data_loader.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace sdp {

IndexedTrainLoader::IndexedTrainLoader(const SampleSet& samples, const LoaderOptions& options)
    : assembler_(samples.make_assembler(options.seeded_augment())),
      sampler_(samples.count(), options.seed, options.rank, options.world, options.batch_size,
               options.accumulate),
      pinned_(options.pinned),
      steps_(options.accumulate),
      prefetcher_(options.prefetch) {}

void IndexedTrainLoader::start(const SampleCursor& from, int64_t max_steps) {
  prefetcher_.stop();  // the worker reads the state below
  cursor_ = from;
  steps_.start(sampler_.steps_left(from), max_steps);
  prefetcher_.start([this](Batch& batch) { return produce(batch); });
}

bool IndexedTrainLoader::produce(Batch& batch) {
  if (steps_.done()) return false;
  sampler_.batch_indices(cursor_, steps_.micro(), indices_);
  batch.pinned = pinned_;
  assembler_->assemble(indices_, cursor_.epoch, batch);
  batch.cursor = cursor_;
  batch.next_cursor = sampler_.advance(cursor_);
  if (steps_.stamp(batch)) cursor_ = batch.next_cursor;
  return true;
}

IndexedEvalLoader::IndexedEvalLoader(const SampleSet& samples, int64_t batch_size, int rank, int world, int prefetch)
    : assembler_(samples.make_assembler({})), batch_size_(batch_size), prefetcher_(prefetch) {
  if (batch_size < 1)
    throw InputError("eval loader: batch size must be >= 1, got " + std::to_string(batch_size));
  if (world < 1 || rank < 0 || rank >= world)
    throw InputError("eval loader: rank " + std::to_string(rank) + " outside world size " +
                     std::to_string(world));
  order_ = eval_indices(samples.count(), rank, world);
}

void IndexedEvalLoader::start() {
  prefetcher_.stop();
  position_ = 0;
  produced_ = 0;
  prefetcher_.start([this](Batch& batch) { return produce(batch); });
}

bool IndexedEvalLoader::produce(Batch& batch) {
  if (position_ >= num_samples()) return false;
  const int64_t end = std::min(num_samples(), position_ + batch_size_);
  indices_.assign(order_.begin() + position_, order_.begin() + end);
  assembler_->assemble(indices_, /*epoch=*/0, batch);
  batch.step = produced_++;
  batch.cursor = batch.next_cursor = SampleCursor{};
  position_ = end;
  return true;
}

}  // namespace sdp
