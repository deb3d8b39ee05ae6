// RankRecords, ShardRecords and RecordStream (record_stream.hpp).
#include "data/loading/record_stream.hpp"

#include <algorithm>
#include <numeric>
#include <random>

#include "core/floating_point.hpp"
#include "data/loading/random.hpp"
#include "data/loading/sampler.hpp"

namespace sdp {

namespace {

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

InputError no_records(int rank) {
  return InputError("rank " + std::to_string(rank) + " gets no record in " + std::to_string(kMaxEmptyPasses) +
                    " passes: every shard (or pipe pass) it is given is empty");
}

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
    : records_(std::move(records)),
      options_(options),
      queue_(static_cast<std::size_t>(std::max<int64_t>(1, options.queue))) {}

RecordStream::~RecordStream() {
  stop();
}

void RecordStream::stop() {
  queue_.stop();
  if (reader_.joinable()) {
    records_->cancel();  // a reader may be blocked on a pipe or a socket
    reader_.join();
  }
}

void RecordStream::start(int64_t pass, int64_t skip) {
  stop();
  queue_.reset();
  reader_ = start_thread([this, pass, skip] {
    std::exception_ptr error;
    try {
      read(pass, skip);
    } catch (...) {
      error = std::current_exception();
    }
    queue_.close(error);
  });
}

bool RecordStream::next(StreamedRecord& out) {
  return queue_.pop(out);
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
        return !queue_.stopped();
      }
      return queue_.push({std::move(record), pass});
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

std::optional<std::pair<int64_t, int64_t>> stream_position(const RankRecords& records, int64_t taken, int rank) {
  int64_t empty_passes = 0;
  for (int64_t pass = 0;; ++pass) {
    const int64_t share = records.pass_samples(pass);
    if (share < 0) return std::nullopt;
    if (taken < share) return std::make_pair(pass, taken);
    taken -= share;
    empty_passes = share == 0 ? empty_passes + 1 : 0;
    if (empty_passes >= kMaxEmptyPasses) throw no_records(rank);
  }
}

}  // namespace sdp
