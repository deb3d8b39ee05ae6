#include "data/sets/stream_source.hpp"

#include <charconv>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>

#include "core/error.hpp"
#include "core/log.hpp"
#include "data/formats/ctr_sample.hpp"
#include "data/formats/ctr_tfrecord.hpp"
#include "data/formats/data_files.hpp"
#include "data/formats/libsvm.hpp"
#include "data/formats/tar_shards.hpp"
#include "data/formats/text_lines.hpp"
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

// LibSVM text or the DeepFM sample's TFRecords, a sample at a time, each judged as the
// in-memory readers judge it (append_ctr_sample: padding, ids against the table) and handed on
// as a packed row. A bad line or record is an InputError naming it or, with ctr.skip_bad,
// skipped and counted (the first named in a warning); a defect of the file itself (a corrupt
// gzip stream, a TFRecord's framing) is an error either way.
class CtrShardReader final : public ShardReader {
 public:
  CtrShardReader(const std::string& path, int shard, const StreamSourceOptions& options)
      : shard_(shard), options_(options.ctr), decoder_(options.ctr) {
    if (options.format == StreamFormat::kLibsvm)
      lines_.emplace(path);
    else
      records_.emplace(path);
    row_.fields = options_.fields;
  }
  ~CtrShardReader() override {
    if (stats_.skipped == 0) return;
    // Once a file and process: the file is read again every pass.
    static std::mutex mutex;
    static std::set<std::string> warned;
    const std::lock_guard<std::mutex> lock(mutex);
    if (warned.insert(path()).second)
      log_warn(path() + ": " + std::to_string(stats_.skipped) + " bad sample(s) skipped (data.on_bad_record: skip); the first: " +
               stats_.first_skipped);
  }

  bool next(EncodedRecord& record) override {
    while (read_sample()) {
      row_.ids.clear();
      row_.values.clear();
      row_.labels.clear();
      try {
        append_ctr_sample(sample_, options_,
                          lines_ ? CtrSampleSource::kLibsvmLine : CtrSampleSource::kExample, row_, stats_);
      } catch (const InputError& e) {
        skip_or_throw(where() + ": " + e.what(), options_, stats_);
        continue;
      }
      pack_ctr_row(row_.ids.data(), row_.values.data(), row_.fields, record.image);
      record.label = static_cast<int64_t>(row_.labels[0]);
      record.shard = shard_;
      record.record = samples_++;
      return true;
    }
    return false;
  }

 private:
  const std::string& path() const { return lines_ ? lines_->path() : records_->path(); }
  std::string where() const {
    return lines_ ? lines_->where() : record_where(records_->path(), records_->records_read() - 1);
  }
  // The next sample as written into sample_; false at the end. Bad ones are skipped or thrown.
  bool read_sample() {
    while (true) {
      if (lines_) {
        std::string_view line;
        if (!lines_->next(line)) return false;
        try {
          if (parse_libsvm_line(line, sample_)) return true;
        } catch (const InputError& e) {
          skip_or_throw(where() + ": " + e.what(), options_, stats_);
        }
      } else {
        if (!records_->next(payload_)) return false;  // a framing defect throws, never skipped
        try {
          decoder_.decode(payload_.data(), payload_.size(), sample_);
          return true;
        } catch (const InputError& e) {
          skip_or_throw(where() + ": " + e.what(), options_, stats_);
        }
      }
    }
  }

  int shard_;
  const CtrReadOptions& options_;
  std::optional<TextLines> lines_;
  std::optional<TfRecordReader> records_;
  CtrExampleDecoder decoder_;
  std::vector<uint8_t> payload_;
  CtrSample sample_;
  CtrRecords row_;
  CtrReadStats stats_;
  int64_t samples_ = 0;
};

// "sdp-stream-index 1\nformat F\ndata_bytes N\nsamples K\n": the count, when the text is that
// of this format and of a data file of `data_bytes` bytes.
// The index's format line: for CTR samples also what decides which lines are samples (a bad
// one skipped, an id out of range an error or hashed), so an index counted under other
// options is not taken.
std::string index_format(const StreamSourceOptions& options) {
  std::string format = stream_format_name(options.format);
  if (options.format == StreamFormat::kLibsvm || options.format == StreamFormat::kCtrTfRecord) {
    const CtrReadOptions& c = options.ctr;
    format += " fields " + std::to_string(c.fields) + " rows " + std::to_string(c.table_rows) +
              (c.id_overflow == IdOverflow::kHash ? " hash" : " error") + (c.skip_bad ? " skip" : " abort");
    if (options.format == StreamFormat::kCtrTfRecord)
      format += " keys " + c.label_key + " " + c.ids_key + " " + c.values_key;
  }
  return format;
}

std::optional<int64_t> parse_count_index(const std::string& text, const StreamSourceOptions& options,
                                         int64_t data_bytes) {
  const std::string head = std::string(kCountIndexMagic) + "\nformat " + index_format(options) +
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
  if (options.format == StreamFormat::kLibsvm || options.format == StreamFormat::kCtrTfRecord)
    return std::make_unique<CtrShardReader>(path, shard, options);
  return std::make_unique<TfRecordShardReader>(path, shard, options);
}

const char* stream_format_name(StreamFormat format) {
  switch (format) {
    case StreamFormat::kTarShards: return "tar-shards";
    case StreamFormat::kLibsvm: return "libsvm";
    case StreamFormat::kCtrTfRecord: return "ctr-tfrecord";
    case StreamFormat::kTfRecord: break;
  }
  return "tfrecord";
}

void pack_ctr_row(const int64_t* ids, const float* values, int fields, std::vector<uint8_t>& out) {
  const std::size_t id_bytes = sizeof(int64_t) * static_cast<std::size_t>(fields);
  out.resize(id_bytes + sizeof(float) * static_cast<std::size_t>(fields));
  std::memcpy(out.data(), ids, id_bytes);
  std::memcpy(out.data() + id_bytes, values, out.size() - id_bytes);
}

void unpack_ctr_row(const std::vector<uint8_t>& bytes, int fields, int64_t* ids, float* values) {
  const std::size_t id_bytes = sizeof(int64_t) * static_cast<std::size_t>(fields);
  if (bytes.size() != id_bytes + sizeof(float) * static_cast<std::size_t>(fields))
    throw std::logic_error("unpack_ctr_row: " + std::to_string(bytes.size()) + " bytes are not a row of " +
                           std::to_string(fields) + " fields");
  std::memcpy(ids, bytes.data(), id_bytes);
  std::memcpy(values, bytes.data() + id_bytes, bytes.size() - id_bytes);
}

int64_t count_stream_samples(const std::string& path, const StreamSourceOptions& options) {
  // A plain TFRecord file of images is counted from its offsets; CTR samples are read, since a
  // skipped bad record is not a sample.
  if (options.format == StreamFormat::kTfRecord && !tfrecord_is_gzip(path))
    return static_cast<int64_t>(tfrecord_index(path).size());
  const std::string index_path = path + ".idx";
  std::error_code ec;
  const auto data_bytes = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec) throw InputError(path + ": cannot read its size: " + ec.message());
  if (const auto text = read_fresh_index(path, index_path, 1024))
    if (const auto count = parse_count_index(*text, options, data_bytes)) return *count;
  // Read as training reads it, so a defect is reported now, naming its record.
  int64_t count = 0;
  EncodedRecord record;
  for (auto reader = open_stream_shard(path, 0, options); reader->next(record);) ++count;
  try {
    write_file_atomically(index_path, std::string(kCountIndexMagic) + "\nformat " +
                                          index_format(options) + "\ndata_bytes " +
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
