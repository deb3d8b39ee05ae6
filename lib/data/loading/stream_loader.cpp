#include "data/loading/stream_loader.hpp"

#include <algorithm>
#include <numeric>
#include <random>

#include "core/error.hpp"
#include "core/floating_point.hpp"
#include "data/loading/random.hpp"
#include "data/loading/sampler.hpp"

namespace sdp {

namespace {

// Fills `records` from the stream and `out.indices` / `keys` from them; `key_stride` folds
// each record's pass into its augmentation key (0: the sample id alone). Returns how many
// records were taken (fewer than `count` only at the end of a finite stream).
int64_t take_records(RecordStream& stream, const RankRecords& source, int64_t count,
                     int64_t key_stride, std::vector<StreamedRecord>& records,
                     std::vector<int64_t>& keys, Batch& out) {
  records.resize(static_cast<std::size_t>(count));
  int64_t taken = 0;
  while (taken < count && stream.next(records[static_cast<std::size_t>(taken)])) ++taken;
  records.resize(static_cast<std::size_t>(taken));
  keys.resize(records.size());
  out.indices.resize(records.size());
  for (std::size_t k = 0; k < records.size(); ++k) {
    out.indices[k] = source.sample_id(records[k]);
    keys[k] = records[k].pass * key_stride + out.indices[k];
  }
  return taken;
}

void decode_records(BatchDecoder& decoder, const RankRecords& source,
                    std::vector<StreamedRecord>& records, const std::vector<int64_t>& keys,
                    Batch& out) {
  decoder.decode(
      keys, /*epoch=*/0,
      [&](int64_t k, std::vector<uint8_t>&, int64_t& label) -> const std::vector<uint8_t>& {
        const EncodedRecord& r = records[static_cast<std::size_t>(k)].record;
        label = r.label;
        return r.image;
      },
      [&](int64_t k) { return source.where(records[static_cast<std::size_t>(k)]); }, out);
}

}  // namespace

// ---- StreamedImageSet ----

StreamedImageSet::StreamedImageSet(std::shared_ptr<const StreamSource> source,
                                   const EncodedImageOptions& options, int64_t shuffle_buffer)
    : source_(std::move(source)), options_(options), shuffle_buffer_(shuffle_buffer) {
  options_ = checked_image_options(source_->name(), options_, options_.num_classes);
}

std::string StreamedImageSet::describe() const {
  return name() + ": " + std::to_string(count()) + " samples in " +
         std::to_string(source_->num_shards()) +
         " shard(s), streamed through a shuffle buffer of " + std::to_string(shuffle_buffer_) +
         " records";
}

std::unique_ptr<TrainLoader> StreamedImageSet::make_train_loader(
    const LoaderOptions& options) const {
  return std::make_unique<StreamTrainLoader>(
      std::make_shared<ShardRecords>(source_, options.seed, options.rank, options.world,
                                     /*shuffle_shards=*/true),
      source_->total(), options_, options, shuffle_buffer_);
}

std::unique_ptr<EvalLoader> StreamedImageSet::make_eval_loader(int64_t batch_size, int rank,
                                                               int world, int prefetch) const {
  return std::make_unique<StreamEvalLoader>(
      std::make_shared<ShardRecords>(source_, /*seed=*/0, rank, world, /*shuffle_shards=*/false),
      options_, batch_size, rank, prefetch);
}

// ---- StreamTrainLoader ----

StreamTrainLoader::StreamTrainLoader(std::shared_ptr<RankRecords> records,
                                     int64_t samples_per_epoch, const EncodedImageOptions& images,
                                     const LoaderOptions& options, int64_t shuffle_buffer)
    : rank_records_(std::move(records)),
      options_(options),
      global_batch_(options.batch_size * options.accumulate * options.world),
      steps_per_epoch_(global_batch_ > 0 ? samples_per_epoch / global_batch_ : 0),
      decoder_(images, images.num_classes, options.seeded_augment()),
      stream_(rank_records_, {options.seed, options.rank, shuffle_buffer, /*repeat=*/true,
                              std::max<int64_t>(256, 2 * options.batch_size)}),
      steps_(options.accumulate),
      prefetcher_(options.prefetch) {
  if (steps_per_epoch_ < 1)
    throw InputError(std::to_string(samples_per_epoch) +
                     " samples are fewer than one global batch of " +
                     std::to_string(global_batch_));
}

int64_t StreamTrainLoader::steps_left(const SampleCursor& at) const {
  return std::max<int64_t>(0, steps_per_epoch_ - at.offset / global_batch_);
}

std::optional<std::pair<int64_t, int64_t>> StreamTrainLoader::stream_position(
    int64_t records) const {
  return sdp::stream_position(*rank_records_, records, options_.rank);
}

void StreamTrainLoader::start(const SampleCursor& from, int64_t max_steps) {
  prefetcher_.stop();  // the worker reads the state below
  step_ = from.epoch * steps_per_epoch_ + std::min(from.offset / global_batch_, steps_per_epoch_);
  steps_.start(steps_left(from), max_steps);
  // An epoch that follows the last one continues the running stream; anything else (the
  // first start, a resume, batches made ahead and dropped) repositions it. A pipe cannot be
  // repositioned: it starts at its first pass and is never restarted.
  const int64_t records = step_ * options_.batch_size * options_.accumulate;
  if (records != stream_records_) {
    if (const auto position = stream_position(records)) {
      stream_.start(position->first, position->second);
    } else if (stream_records_ < 0) {
      stream_.start(0, 0);
    }
    stream_records_ = records;
  }
  prefetcher_.start([this](Batch& batch) { return produce(batch); });
}

bool StreamTrainLoader::produce(Batch& batch) {
  if (steps_.done()) return false;
  const RankRecords& source = *rank_records_;
  const int64_t taken = take_records(stream_, source, options_.batch_size, source.key_stride(),
                                     records_, keys_, batch);
  stream_records_ += taken;
  if (taken < options_.batch_size)
    throw std::logic_error("StreamTrainLoader: the repeating stream ended");
  batch.pinned = options_.pinned;
  decode_records(decoder_, source, records_, keys_, batch);
  batch.cursor = cursor_at_step(step_, steps_per_epoch_, global_batch_);
  batch.next_cursor = cursor_at_step(step_ + 1, steps_per_epoch_, global_batch_);
  if (steps_.stamp(batch)) ++step_;
  return true;
}

// ---- StreamEvalLoader ----

StreamEvalLoader::StreamEvalLoader(std::shared_ptr<RankRecords> records,
                                   const EncodedImageOptions& images, int64_t batch_size, int rank,
                                   int prefetch, int64_t pass)
    : rank_records_(std::move(records)),
      batch_size_(batch_size),
      pass_(pass),
      samples_(rank_records_->pass_samples(pass)),
      decoder_(images, images.num_classes, AugmentOptions{}),
      stream_(rank_records_, {0, rank, /*shuffle_buffer=*/0, /*repeat=*/false,
                              std::max<int64_t>(256, 2 * batch_size)}),
      prefetcher_(prefetch) {
  if (batch_size < 1)
    throw InputError("eval loader: batch size must be >= 1, got " + std::to_string(batch_size));
}

void StreamEvalLoader::start() {
  prefetcher_.stop();
  stream_.start(pass_, 0);
  produced_ = 0;
  prefetcher_.start([this](Batch& batch) { return produce(batch); });
}

bool StreamEvalLoader::produce(Batch& batch) {
  if (take_records(stream_, *rank_records_, batch_size_, 0, records_, keys_, batch) == 0)
    return false;
  decode_records(decoder_, *rank_records_, records_, keys_, batch);
  batch.step = produced_++;
  batch.cursor = batch.next_cursor = SampleCursor{};
  return true;
}

}  // namespace sdp
