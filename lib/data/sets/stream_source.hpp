// Streamed shards: encoded samples read in order, shard after shard, never by offset, so that
// gzip files and SageMaker's pipes (pipe_channel.hpp) serve as well as plain files. Formats: TFRecord files
// of tf.train.Examples (plain or gzip) and WebDataset tar shards (plain or gzip: an image member,
// .jpg / .jpeg / .png, and a label member, .cls by default); for the CTR models, LibSVM text and
// TFRecords of the DeepFM sample's layout, each sample a packed row (pack_ctr_row).
//
// StreamSource lists a data set's shards and how many samples each holds, from a per-shard index
// (<file>.idx) made by reading the shard once; the loaders (stream_loader.hpp) need the counts to
// agree on steps per epoch and to find where a resumed job stands. Sample ids: shard s holds
// first_id(s) .. first_id(s) + shard_samples(s) - 1, in shard order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/formats/ctr_records.hpp"
#include "data/formats/record_fields.hpp"

namespace sdp {

enum class StreamFormat { kTfRecord, kTarShards, kLibsvm, kCtrTfRecord };

struct StreamSourceOptions : RecordFields {
  StreamFormat format = StreamFormat::kTfRecord;
  CtrReadOptions ctr;  // kLibsvm, kCtrTfRecord: the row's fields, the table, the keys, skip or not
};

struct EncodedRecord {
  std::vector<uint8_t> image;  // the encoded image's bytes; a CTR sample's packed row (pack_ctr_row)
  int64_t label = 0;           // label_offset already subtracted
  int shard = 0;
  int64_t record = 0;  // in its shard, from 0
};

// One shard, read in order.
class ShardReader {
 public:
  virtual ~ShardReader() = default;
  // Replaces `record` with the next sample; false at the end of the shard. Throws InputError
  // "<file>: record <n> (from 0)...: ..." for a defect of the framing, the Example, or a tar
  // sample without its image or label member.
  virtual bool next(EncodedRecord& record) = 0;
};

// A reader of one shard at `path` (numbered `shard` in the records it gives). `stream`: the
// file is a Pipe-mode FIFO carrying a channel's objects back to back (tar archives one after
// another). Throws InputError when it cannot be opened.
std::unique_ptr<ShardReader> open_stream_shard(const std::string& path, int shard,
                                               const StreamSourceOptions& options, bool stream = false);
// "tfrecord", "tar-shards", "libsvm" or "ctr-tfrecord".
const char* stream_format_name(StreamFormat format);

// A CTR sample's row (`fields` ids, then `fields` values, native byte order) as a record's
// bytes, and back: what the CTR formats' readers hand the record streams and pipes.
void pack_ctr_row(const int64_t* ids, const float* values, int fields, std::vector<uint8_t>& out);
// Throws std::logic_error when `bytes` is not one row of `fields`.
void unpack_ctr_row(const std::vector<uint8_t>& bytes, int fields, int64_t* ids, float* values);

// The samples of one shard: from its index file when that is fresh, otherwise by reading the
// shard (every record checked as the training reads it), after which the index is written
// for next time (a read-only directory only costs the reading). A plain TFRecord file's count
// comes from its offset index (tfrecord.hpp). Throws InputError for a defect met on the way.
int64_t count_stream_samples(const std::string& path, const StreamSourceOptions& options);

class StreamSource {
 public:
  // The shards under `path` (data_files.hpp: a file, or a directory's files sorted by name)
  // and their counts. Throws InputError for a missing path, an empty directory, a defective
  // shard, or a set without a sample.
  StreamSource(const std::string& path, const StreamSourceOptions& options);

  std::string name() const;  // "tar-shards:/data/train"
  int num_shards() const { return static_cast<int>(shards_.size()); }
  const std::string& shard_path(int shard) const {
    return shards_[static_cast<std::size_t>(shard)];
  }
  int64_t shard_samples(int shard) const { return counts_[static_cast<std::size_t>(shard)]; }
  const std::vector<int64_t>& shard_counts() const { return counts_; }
  int64_t first_id(int shard) const { return first_ids_[static_cast<std::size_t>(shard)]; }
  int64_t total() const { return total_; }

  std::unique_ptr<ShardReader> open(int shard) const;
  // Names a sample in an error: "<file>: record <n> (from 0)".
  std::string where(int shard, int64_t record) const;

 private:
  std::string path_;
  StreamSourceOptions options_;
  std::vector<std::string> shards_;
  std::vector<int64_t> counts_, first_ids_;
  int64_t total_ = 0;
};

}  // namespace sdp
