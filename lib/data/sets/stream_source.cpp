#include "data/sets/stream_source.hpp"

#include <charconv>
#include <filesystem>
#include <optional>

#include "core/error.hpp"
#include "core/log.hpp"
#include "data/formats/data_files.hpp"
#include "data/formats/tar_shards.hpp"
#include "data/formats/tf_example.hpp"
#include "data/formats/tfrecord.hpp"

namespace sdp {

namespace {

constexpr const char* kCountIndexMagic = "sdp-stream-index 1";

std::string record_where(const std::string& path, int64_t record) {
  return path + ": record " + std::to_string(record) + " (from 0)";
}

class TfRecordShardReader final : public ShardReader {
 public:
  TfRecordShardReader(const std::string& path, int shard, const StreamSourceOptions& options)
      : reader_(path), shard_(shard), options_(options) {}

  bool next(EncodedRecord& record) override {
    const int64_t number = reader_.records_read();
    if (!reader_.next(payload_)) return false;
    ExampleFields fields;
    try {
      fields =
          parse_example(payload_.data(), payload_.size(), options_.image_key, options_.label_key);
    } catch (const InputError& e) {
      throw InputError(record_where(reader_.path(), number) + ": " + e.what());
    }
    record.image = std::move(fields.image);
    record.label = fields.label - options_.label_offset;
    record.shard = shard_;
    record.record = number;
    return true;
  }

 private:
  TfRecordReader reader_;
  int shard_;
  const StreamSourceOptions& options_;
  std::vector<uint8_t> payload_;
};

class TarShardStreamReader final : public ShardReader {
 public:
  TarShardStreamReader(const std::string& path, int shard, const StreamSourceOptions& options,
                       bool concatenated)
      : reader_(path, concatenated), shard_(shard), options_(options) {}

  bool next(EncodedRecord& record) override {
    if (!reader_.next(sample_)) return false;
    const int64_t number = samples_++;
    auto fail = [&](const std::string& what) {
      throw InputError(record_where(reader_.path(), number) + " (key '" + sample_.key +
                       "'): " + what);
    };
    std::vector<uint8_t>* image = tar_sample_image(sample_);
    if (image == nullptr) fail("no .jpg, .jpeg or .png member");
    const auto label = sample_.files.find(options_.label_extension);
    if (label == sample_.files.end()) fail("no ." + options_.label_extension + " member");
    try {
      record.label = parse_tar_label(label->second) - options_.label_offset;
    } catch (const InputError& e) {
      fail(e.what());
    }
    record.image = std::move(*image);
    record.shard = shard_;
    record.record = number;
    return true;
  }

 private:
  TarShardReader reader_;
  int shard_;
  const StreamSourceOptions& options_;
  TarSample sample_;
  int64_t samples_ = 0;
};


// "sdp-stream-index 1\nformat F\ndata_bytes N\nsamples K\n": the count, when the text is that
// of this format and of a data file of `data_bytes` bytes.
std::optional<int64_t> parse_count_index(const std::string& text, StreamFormat format,
                                         int64_t data_bytes) {
  const std::string head = std::string(kCountIndexMagic) + "\nformat " + stream_format_name(format) +
                           "\ndata_bytes " + std::to_string(data_bytes) + "\nsamples ";
  if (text.compare(0, head.size(), head) != 0 || text.back() != '\n') return std::nullopt;
  int64_t count = -1;
  const char* first = text.data() + head.size();
  const char* last = text.data() + text.size() - 1;
  const auto [end, ec] = std::from_chars(first, last, count);
  if (ec != std::errc() || end != last || count < 0) return std::nullopt;
  return count;
}

}  // namespace

std::unique_ptr<ShardReader> open_stream_shard(const std::string& path, int shard,
                                               const StreamSourceOptions& options, bool stream) {
  if (options.format == StreamFormat::kTarShards)
    return std::make_unique<TarShardStreamReader>(path, shard, options, stream);
  return std::make_unique<TfRecordShardReader>(path, shard, options);
}

const char* stream_format_name(StreamFormat format) {
  return format == StreamFormat::kTarShards ? "tar-shards" : "tfrecord";
}

int64_t count_stream_samples(const std::string& path, const StreamSourceOptions& options) {
  if (options.format == StreamFormat::kTfRecord && !tfrecord_is_gzip(path))
    return static_cast<int64_t>(tfrecord_index(path).size());
  const std::string index_path = path + ".idx";
  std::error_code ec;
  const auto data_bytes = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec) throw InputError(path + ": cannot read its size: " + ec.message());
  if (const auto text = read_fresh_index(path, index_path, 256))
    if (const auto count = parse_count_index(*text, options.format, data_bytes)) return *count;
  // Read as training reads it, so a defect is reported now, naming its record.
  int64_t count = 0;
  EncodedRecord record;
  for (auto reader = open_stream_shard(path, 0, options); reader->next(record);) ++count;
  try {
    write_file_atomically(index_path, std::string(kCountIndexMagic) + "\nformat " +
                                          stream_format_name(options.format) + "\ndata_bytes " +
                                          std::to_string(data_bytes) + "\nsamples " +
                                          std::to_string(count) + "\n");
  } catch (const RuntimeError& e) {
    log_warn(std::string("stream index not saved, the shard will be read again next time: ") +
             e.what());
  }
  return count;
}

StreamSource::StreamSource(const std::string& path, const StreamSourceOptions& options)
    : path_(path), options_(options) {
  shards_ = list_data_files(path, std::string("data.format ") + stream_format_name(options.format));
  for (const std::string& shard : shards_) {
    first_ids_.push_back(total_);
    counts_.push_back(count_stream_samples(shard, options_));
    total_ += counts_.back();
  }
  if (total_ == 0)
    throw InputError(name() + ": no samples in " + std::to_string(shards_.size()) + " shard(s)");
}

std::string StreamSource::name() const {
  return std::string(stream_format_name(options_.format)) + ":" + path_;
}

std::unique_ptr<ShardReader> StreamSource::open(int shard) const {
  return open_stream_shard(shard_path(shard), shard, options_);
}

std::string StreamSource::where(int shard, int64_t record) const {
  return record_where(shard_path(shard), record);
}

}  // namespace sdp
