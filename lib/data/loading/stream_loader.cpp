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

// A rank's stream looks this many passes ahead for a record before calling its share empty.
constexpr int64_t kMaxEmptyPasses = 1000;

// A rank whose passes hold nothing, pass after pass, would wait for ever.
InputError no_records(int rank) {
  return InputError("rank " + std::to_string(rank) + " gets no record in " +
                    std::to_string(kMaxEmptyPasses) +
                    " passes: every shard (or pipe pass) it is given is empty");
}

AugmentOptions seeded(AugmentOptions augment, uint64_t seed) {
  augment.seed = seed;
  return augment;
}

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

// The records of one pass of a ShardRecords: its shards in order, every stride-th record kept;
// a shard whose count changed since the start is an error (the counts decide every rank's share).
class ShareReader final : public ShardReader {
 public:
  ShareReader(const StreamSource& source, PassShare share)
      : source_(source), share_(std::move(share)) {}

  bool next(EncodedRecord& record) override {
    for (;;) {
      if (!reader_) {
        if (next_shard_ == share_.shards.size()) return false;
        shard_ = share_.shards[next_shard_++];
        reader_ = source_.open(shard_);
        in_shard_ = 0;
      }
      if (!reader_->next(record)) {
        if (in_shard_ != source_.shard_samples(shard_))
          throw InputError(source_.shard_path(shard_) + ": holds " + std::to_string(in_shard_) +
                           " records, but its count when the job started was " +
                           std::to_string(source_.shard_samples(shard_)) +
                           ": the file changed during the job");
        reader_.reset();
        continue;
      }
      ++in_shard_;
      if (read_++ % share_.stride == share_.phase) return true;
    }
  }

 private:
  const StreamSource& source_;
  PassShare share_;
  std::size_t next_shard_ = 0;
  int shard_ = 0;
  std::unique_ptr<ShardReader> reader_;
  int64_t in_shard_ = 0, read_ = 0;
};

}  // namespace

PassShare pass_share(const std::vector<int64_t>& shard_samples, uint64_t seed, int64_t pass,
                     int rank, int world, bool shuffle) {
  const auto shards = static_cast<int64_t>(shard_samples.size());
  std::vector<int64_t> order(static_cast<std::size_t>(shards));
  if (shuffle)
    order = epoch_permutation(shards, mix_keys(seed, random_stream::kShardOrder), pass);
  else
    std::iota(order.begin(), order.end(), int64_t{0});
  PassShare share;
  if (shards >= world) {
    for (int64_t i = rank; i < shards; i += world) {
      share.shards.push_back(static_cast<int>(order[static_cast<std::size_t>(i)]));
      share.samples += shard_samples[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])];
    }
    return share;
  }
  for (int64_t s : order) share.shards.push_back(static_cast<int>(s));
  share.stride = world;
  share.phase = rank;
  const int64_t total = std::accumulate(shard_samples.begin(), shard_samples.end(), int64_t{0});
  share.samples = total > rank ? (total - rank - 1) / world + 1 : 0;
  return share;
}

// ---- ShardRecords ----

ShardRecords::ShardRecords(std::shared_ptr<const StreamSource> source, uint64_t seed, int rank,
                           int world, bool shuffle_shards)
    : source_(std::move(source)),
      seed_(seed),
      rank_(rank),
      world_(world),
      shuffle_shards_(shuffle_shards) {}

std::unique_ptr<ShardReader> ShardRecords::open_pass(int64_t pass) {
  return std::make_unique<ShareReader>(
      *source_, pass_share(source_->shard_counts(), seed_, pass, rank_, world_, shuffle_shards_));
}

int64_t ShardRecords::pass_samples(int64_t pass) const {
  return pass_share(source_->shard_counts(), seed_, pass, rank_, world_, shuffle_shards_).samples;
}

// ---- RecordStream ----

RecordStream::RecordStream(std::shared_ptr<RankRecords> records, const Options& options)
    : records_(std::move(records)), options_(options) {
  options_.queue = std::max<int64_t>(1, options_.queue);
}

RecordStream::~RecordStream() {
  stop();
}

void RecordStream::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (reader_.joinable()) {
    records_->cancel();  // a reader may be blocked on a pipe or a socket
    reader_.join();
  }
}

void RecordStream::start(int64_t pass, int64_t skip) {
  stop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.clear();
    done_ = false;
    stop_ = false;
    error_ = nullptr;
  }
  reader_ = start_thread([this, pass, skip] {
    try {
      read(pass, skip);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
  });
}

bool RecordStream::push(StreamedRecord&& record) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return stop_ || static_cast<int64_t>(queue_.size()) < options_.queue; });
  if (stop_) return false;
  queue_.push_back(std::move(record));
  lock.unlock();
  cv_.notify_all();
  return true;
}

bool RecordStream::next(StreamedRecord& out) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !queue_.empty() || done_; });
  if (queue_.empty()) {
    if (error_) std::rethrow_exception(error_);
    return false;
  }
  out = std::move(queue_.front());
  queue_.pop_front();
  lock.unlock();
  cv_.notify_all();
  return true;
}

void RecordStream::read(int64_t first_pass, int64_t skip) {
  RankRecords& source = *records_;
  const auto buffer_size = static_cast<std::size_t>(std::max<int64_t>(1, options_.shuffle_buffer));
  int64_t empty_passes = 0;
  for (int64_t pass = first_pass;; ++pass) {
    const int64_t expected = source.pass_samples(pass);
    if (expected == 0) {
      if (++empty_passes >= kMaxEmptyPasses) throw no_records(options_.rank);
      if (!options_.repeat) return;
      continue;
    }
    empty_passes = 0;
    // tf.data's shuffle(buffer): fill the buffer, then each record read takes the place of a
    // random one, which goes out; at the end of the pass the buffer drains in random order.
    std::mt19937_64 rng(mix_keys(options_.seed ^ random_stream::kShuffleBuffer, static_cast<uint64_t>(pass),
                                 static_cast<uint64_t>(options_.rank)));
    std::vector<EncodedRecord> buffer;
    buffer.reserve(expected > 0
                       ? std::min<std::size_t>(buffer_size, static_cast<std::size_t>(expected))
                       : buffer_size);
    int64_t to_drop = pass == first_pass ? skip : 0;
    auto emit = [&](EncodedRecord&& record) {
      if (to_drop > 0) {  // a resume reads up to where it stopped
        --to_drop;
        std::lock_guard<std::mutex> lock(mu_);
        return !stop_;
      }
      return push({std::move(record), pass});
    };
    const auto reader = source.open_pass(pass);
    EncodedRecord record;
    int64_t read = 0;
    while (reader->next(record)) {
      ++read;
      if (buffer.size() < buffer_size) {
        buffer.push_back(std::move(record));
        continue;
      }
      std::swap(buffer[uniform_below(rng, buffer.size())], record);
      if (!emit(std::move(record))) return;
    }
    while (!buffer.empty()) {
      std::swap(buffer[uniform_below(rng, buffer.size())], buffer.back());
      if (!emit(std::move(buffer.back()))) return;
      buffer.pop_back();
    }
    if (read == 0 && expected < 0 && ++empty_passes >= kMaxEmptyPasses)
      throw no_records(options_.rank);
    if (!options_.repeat) return;
  }
}

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
      decoder_(images, images.num_classes, seeded(options.augment, options.seed)),
      stream_(rank_records_, {options.seed, options.rank, shuffle_buffer, /*repeat=*/true,
                              std::max<int64_t>(256, 2 * options.batch_size)}),
      prefetcher_(options.prefetch) {
  if (steps_per_epoch_ < 1)
    throw InputError(std::to_string(samples_per_epoch) +
                     " samples are fewer than one global batch of " +
                     std::to_string(global_batch_));
}

int64_t StreamTrainLoader::steps_left(const SampleCursor& at) const {
  return std::max<int64_t>(0, steps_per_epoch_ - at.offset / global_batch_);
}

SampleCursor StreamTrainLoader::cursor_of_step(int64_t global_step) const {
  return {global_step / steps_per_epoch_, (global_step % steps_per_epoch_) * global_batch_};
}

std::optional<std::pair<int64_t, int64_t>> StreamTrainLoader::stream_position(
    int64_t records) const {
  int64_t empty_passes = 0;
  for (int64_t pass = 0;; ++pass) {
    const int64_t share = rank_records_->pass_samples(pass);
    if (share < 0) return std::nullopt;
    if (records < share) return std::make_pair(pass, records);
    records -= share;
    empty_passes = share == 0 ? empty_passes + 1 : 0;
    if (empty_passes >= kMaxEmptyPasses) throw no_records(options_.rank);
  }
}

void StreamTrainLoader::start(const SampleCursor& from, int64_t max_steps) {
  prefetcher_.stop();  // the worker reads the state below
  step_ = from.epoch * steps_per_epoch_ + std::min(from.offset / global_batch_, steps_per_epoch_);
  produced_ = 0;
  micro_ = 0;
  limit_ = steps_left(from);
  if (max_steps >= 0) limit_ = std::min(limit_, max_steps);
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
  if (produced_ >= limit_) return false;
  const RankRecords& source = *rank_records_;
  const int64_t taken = take_records(stream_, source, options_.batch_size, source.key_stride(),
                                     records_, keys_, batch);
  stream_records_ += taken;
  if (taken < options_.batch_size)
    throw std::logic_error("StreamTrainLoader: the repeating stream ended");
  batch.pinned = options_.pinned;
  decode_records(decoder_, source, records_, keys_, batch);
  batch.step = produced_;
  batch.micro = micro_;
  batch.cursor = cursor_of_step(step_);
  batch.next_cursor = cursor_of_step(step_ + 1);
  if (++micro_ == options_.accumulate) {
    micro_ = 0;
    ++produced_;
    ++step_;
  }
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
