#include "data/tools/inspect.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include "core/bytes.hpp"
#include "core/error.hpp"
#include "data/formats/ctr_sample.hpp"
#include "data/formats/ctr_tfrecord.hpp"
#include "data/formats/data_files.hpp"
#include "data/formats/libsvm.hpp"
#include "data/formats/tar_shards.hpp"
#include "data/formats/tf_example.hpp"
#include "data/formats/tfrecord.hpp"
#include "data/sets/image_folder.hpp"

namespace sdp {

namespace {

bool is_tar_name(const std::string& path) {
  return ends_with(path, ".tar") || ends_with(path, ".tar.gz") || ends_with(path, ".tgz");
}

bool is_ctr_format(const std::string& format) { return format == "libsvm" || format == "ctr-tfrecord"; }

// The Example keys of ctr-tfrecord: the label is "label" unless --label-key named another.
CtrReadOptions ctr_keys(const InspectOptions& options) {
  CtrReadOptions keys;
  if (options.label_key != RecordFields{}.label_key) keys.label_key = options.label_key;
  keys.ids_key = options.ids_key;
  keys.values_key = options.values_key;
  return keys;
}

// True when the first record of a TFRecord file is an Example with feature `key`.
bool first_example_has(const std::string& file, const std::string& key) {
  try {
    TfRecordReader reader(file);
    std::vector<uint8_t> payload;
    return reader.next(payload) && parse_example_features(payload.data(), payload.size()).count(key) > 0;
  } catch (const InputError&) {
    return false;  // the image reader will name the defect
  }
}

std::string resolve_format(const std::vector<std::string>& files, const InspectOptions& options) {
  const std::string& requested = options.format;
  if (requested == "tfrecord" || requested == "tar-shards" || is_ctr_format(requested)) return requested;
  if (requested != "auto")
    throw InputError("data inspect: --format " + requested +
                     " is not one of auto, tfrecord, tar-shards, image-folder, libsvm, ctr-tfrecord");
  if (is_tar_name(files.front())) return "tar-shards";
  // Before the TFRecord test: that takes any gzip file, and LibSVM files are often gzipped.
  if (looks_like_libsvm(files.front())) return "libsvm";
  if (looks_like_tfrecord(files.front()))
    return first_example_has(files.front(), options.ids_key) ? "ctr-tfrecord" : "tfrecord";
  throw InputError("data inspect: " + files.front() +
                   " is neither a tar shard (.tar, .tar.gz, .tgz), a TFRecord file nor LibSVM text; name the format "
                   "with --format");
}

// How often each id occurs, in an open-addressing table (ids are >= 0, so -1 marks a free
// slot): 16 bytes a slot where std::unordered_map takes about 40 a node, for the tens of
// millions of distinct ids of a large CTR set.
class IdCounts {
 public:
  void add(int64_t id) {
    if (2 * (used_ + 1) > ids_.size()) grow();
    std::size_t slot = slot_of(id);
    while (ids_[slot] != id && ids_[slot] != -1) slot = (slot + 1) & (ids_.size() - 1);
    if (ids_[slot] == -1) {
      ids_[slot] = id;
      ++used_;
    }
    ++counts_[slot];
  }
  int64_t distinct() const { return static_cast<int64_t>(used_); }
  // The sum of the n largest counts.
  int64_t top_total(std::size_t n) const {
    std::vector<int64_t> counts;
    counts.reserve(used_);
    for (std::size_t i = 0; i < ids_.size(); ++i)
      if (ids_[i] != -1) counts.push_back(counts_[i]);
    n = std::min(n, counts.size());
    std::nth_element(counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(n), counts.end(),
                     std::greater<int64_t>());
    int64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += counts[i];
    return total;
  }

 private:
  // Fibonacci hashing: the top bits of id * 2^64 / golden ratio, so runs of ids spread out.
  std::size_t slot_of(int64_t id) const {
    return static_cast<std::size_t>((static_cast<uint64_t>(id) * 0x9e3779b97f4a7c15ULL) >> (64 - bits_));
  }
  void grow() {
    std::vector<int64_t> old_ids = std::move(ids_), old_counts = std::move(counts_);
    bits_ = old_ids.empty() ? 10 : bits_ + 1;
    ids_.assign(std::size_t{1} << bits_, -1);
    counts_.assign(ids_.size(), 0);
    for (std::size_t i = 0; i < old_ids.size(); ++i) {
      if (old_ids[i] == -1) continue;
      std::size_t slot = slot_of(old_ids[i]);
      while (ids_[slot] != -1) slot = (slot + 1) & (ids_.size() - 1);
      ids_[slot] = old_ids[i];
      counts_[slot] = old_counts[i];
    }
  }

  std::vector<int64_t> ids_, counts_;
  std::size_t used_ = 0;
  int bits_ = 0;
};

// The CTR summary of every sample read (DataInspection::ctr and labels).
class CtrTally {
 public:
  explicit CtrTally(DataInspection& result) : result_(result) {}
  void add(const CtrSample& sample) {
    ++result_.labels[sample.label == 1 ? 1 : 0];
    // Trailing pairs of id 0, value 0 are padding (they add nothing to a model), not ids: a
    // converted file, which holds its padding, sums up as its LibSVM source did.
    std::size_t length = sample.ids.size();
    while (length > 0 && sample.ids[length - 1] == 0 && sample.values[length - 1] == 0) --length;
    ++rows_by_length_[length];
    CtrInspection& c = result_.ctr;
    for (std::size_t k = 0; k < length; ++k) {
      const int64_t id = sample.ids[k];
      c.min_id = c.id_occurrences == 0 ? id : std::min(c.min_id, id);
      c.max_id = std::max(c.max_id, id);
      ++c.id_occurrences;
      ids_.add(id);
    }
    ++result_.records;
  }
  void finish() {
    CtrInspection& c = result_.ctr;
    c.fields = rows_by_length_.empty() ? 0 : static_cast<int64_t>(rows_by_length_.rbegin()->first);
    c.padded = 0;
    for (const auto& [length, rows] : rows_by_length_)
      if (static_cast<int64_t>(length) < c.fields) c.padded += rows;
    c.distinct_ids = ids_.distinct();
    c.top10_share = c.id_occurrences == 0 ? 0
                                          : static_cast<double>(ids_.top_total(10)) /
                                                static_cast<double>(c.id_occurrences);
  }

 private:
  DataInspection& result_;
  std::map<std::size_t, int64_t> rows_by_length_;
  IdCounts ids_;
};

class Tally {
 public:
  explicit Tally(DataInspection& result) : result_(result) {}
  void add(int64_t label, std::size_t image_bytes) {
    ++result_.labels[label];
    const auto bytes = static_cast<int64_t>(image_bytes);
    result_.image_bytes_min = result_.records == 0 ? bytes : std::min(result_.image_bytes_min, bytes);
    result_.image_bytes_max = std::max(result_.image_bytes_max, bytes);
    total_ += static_cast<double>(bytes);
    ++result_.records;
    result_.image_bytes_mean = total_ / static_cast<double>(result_.records);
  }

 private:
  DataInspection& result_;
  double total_ = 0;
};

// The message of a defect, naming the file and the record once: the readers' own messages
// name them already, the Example's and the label's do not.
void record_defect(DataInspection& result, const std::string& file, int64_t record, const std::string& what) {
  result.bad_file = file;
  result.bad_record = record;
  result.bad_message = what.compare(0, file.size(), file) == 0
                           ? what
                           : file + ": record " + std::to_string(record) + " (from 0): " + what;
}

// Reads every record of `file`; false when a defect (recorded in `result`) or max_records
// ended the reading.
bool inspect_tfrecord(const std::string& file, const InspectOptions& options, Tally& tally, DataInspection& result) {
  TfRecordReader reader(file);
  std::vector<uint8_t> payload;
  while (true) {
    if (options.max_records > 0 && result.records >= options.max_records) return false;
    const int64_t record = reader.records_read();
    try {
      if (!reader.next(payload)) return true;
      const ExampleFields fields =
          parse_example(payload.data(), payload.size(), options.image_key, options.label_key);
      tally.add(fields.label, fields.image.size());
    } catch (const InputError& e) {
      record_defect(result, file, record, e.what());
      return false;
    }
  }
}

bool inspect_tar(const std::string& file, const InspectOptions& options, Tally& tally, DataInspection& result) {
  TarShardReader reader(file);
  TarSample sample;
  int64_t index = 0;
  while (true) {
    if (options.max_records > 0 && result.records >= options.max_records) return false;
    try {
      if (!reader.next(sample)) return true;
      for (const auto& [extension, bytes] : sample.files) ++result.members[extension];
      const auto label = sample.files.find(options.label_extension);
      if (label == sample.files.end())
        throw InputError("sample '" + sample.key + "' has no ." + options.label_extension + " member");
      std::size_t image_bytes = 0;
      for (const auto& [extension, bytes] : sample.files)
        if (extension != options.label_extension) image_bytes += bytes.size();
      tally.add(parse_tar_label(label->second), image_bytes);
    } catch (const InputError& e) {
      record_defect(result, file, index, e.what());
      return false;
    }
    ++index;
  }
}

// Reads every sample of a LibSVM file; false when a defect (recorded in `result`) or
// max_records ended the reading.
bool inspect_libsvm(const std::string& file, const InspectOptions& options, CtrTally& tally, DataInspection& result) {
  LibsvmReader reader(file);
  CtrSample sample;
  while (true) {
    if (options.max_records > 0 && result.records >= options.max_records) return false;
    try {
      if (!reader.next(sample)) return true;  // a bad line's message names the file and line
      try {
        check_ctr_sample(sample, CtrSampleSource::kLibsvmLine);
      } catch (const InputError& e) {
        throw InputError(reader.where() + ": " + e.what());
      }
      tally.add(sample);
    } catch (const InputError& e) {
      record_defect(result, file, result.records, e.what());
      return false;
    }
  }
}

bool inspect_ctr_tfrecord(const std::string& file, const InspectOptions& options, CtrTally& tally,
                          DataInspection& result) {
  TfRecordReader reader(file);
  CtrExampleDecoder decoder(ctr_keys(options));
  CtrSample sample;
  std::vector<uint8_t> payload;
  while (true) {
    if (options.max_records > 0 && result.records >= options.max_records) return false;
    const int64_t record = reader.records_read();
    try {
      if (!reader.next(payload)) return true;
      decoder.decode(payload.data(), payload.size(), sample);
      check_ctr_sample(sample, CtrSampleSource::kExample);
      tally.add(sample);
    } catch (const InputError& e) {
      record_defect(result, file, record, e.what());
      return false;
    }
  }
}

// A directory holding folders and no data file: torchvision's ImageFolder layout.
bool looks_like_image_folder(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return false;
  bool folders = false;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    if (entry.is_directory(ec)) folders = true;
    else if (entry.is_regular_file(ec) && !ends_with(name, ".idx")) return false;
  }
  return folders;
}

// The folder as training lists it; each image's size from the file system (nothing decoded).
DataInspection inspect_image_folder(const std::string& path) {
  DataInspection result;
  result.format = "image-folder";
  const ImageFolder folder = list_image_folder(path);
  result.files = {path};
  result.classes = folder.classes;
  Tally tally(result);
  for (const ImageFolderSample& sample : folder.samples) {
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(sample.path, ec);
    if (ec) throw InputError("data inspect: " + sample.path + ": " + ec.message());
    tally.add(sample.label, static_cast<std::size_t>(bytes));
  }
  return result;
}

}  // namespace

DataInspection inspect_data(const std::string& path, const InspectOptions& options) {
  if (options.format == "image-folder" || (options.format == "auto" && looks_like_image_folder(path)))
    return inspect_image_folder(path);
  DataInspection result;
  result.files = list_data_files(path, "data inspect");
  result.format = resolve_format(result.files, options);
  Tally tally(result);
  CtrTally ctr_tally(result);
  for (const std::string& file : result.files) {
    bool went_on = false;
    if (result.format == "tfrecord")
      went_on = inspect_tfrecord(file, options, tally, result);
    else if (result.format == "tar-shards")
      went_on = inspect_tar(file, options, tally, result);
    else if (result.format == "libsvm")
      went_on = inspect_libsvm(file, options, ctr_tally, result);
    else
      went_on = inspect_ctr_tfrecord(file, options, ctr_tally, result);
    if (!went_on) {
      if (result.bad_message.empty()) result.complete = false;  // max_records reached
      break;
    }
  }
  if (is_ctr_format(result.format)) ctr_tally.finish();
  return result;
}

namespace {

std::string percent(double share) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100 * share);
  return text;
}

// The CTR lines: what model.fields and model.table_rows need, and how skewed the data is.
void format_ctr(const DataInspection& r, std::ostringstream& out) {
  const CtrInspection& c = r.ctr;
  const std::string unit = r.format == "libsvm" ? " pairs" : " ids";
  out << "fields        " << c.fields << " (the longest row; model.fields >= " << c.fields << " reads every row)\n";
  out << "padded rows   " << c.padded << " (shorter than " << c.fields << unit << ": padded with id 0, value 0)\n";
  if (c.id_occurrences > 0) {
    out << "ids           " << c.min_id << " .. " << c.max_id << ", " << c.distinct_ids
        << " distinct (model.table_rows >= " << c.max_id + 1 << " holds them all)\n";
    out << "top-10 ids    " << percent(c.top10_share) << " of " << c.id_occurrences << " id occurrences\n";
  }
  if (r.records > 0) {
    const auto count = [&](int64_t label) {
      const auto it = r.labels.find(label);
      return it == r.labels.end() ? int64_t{0} : it->second;
    };
    out << "labels        " << count(0) << " of 0, " << count(1) << " of 1 ("
        << percent(static_cast<double>(count(1)) / static_cast<double>(r.records)) << " positive)\n";
  }
}

}  // namespace

std::string format_inspection(const DataInspection& r) {
  std::ostringstream out;
  out << "format        " << r.format << "\n";
  out << "files         " << r.files.size() << (r.files.size() == 1 ? " (" + r.files.front() + ")" : "") << "\n";
  out << "records       " << r.records << (r.complete ? "" : " (stopped at --max-records)") << "\n";
  if (is_ctr_format(r.format)) {
    format_ctr(r, out);
  } else if (!r.labels.empty()) {
    out << "labels        " << r.labels.size() << " distinct, " << r.labels.begin()->first << " .. "
        << r.labels.rbegin()->first << "\n";
    int64_t fewest = INT64_MAX, most = 0;
    for (const auto& [label, count] : r.labels) {
      fewest = std::min(fewest, count);
      most = std::max(most, count);
    }
    out << "per label     " << fewest << " .. " << most << " records\n";
    char mean[32];
    std::snprintf(mean, sizeof mean, "%.0f", r.image_bytes_mean);
    out << "image bytes   " << r.image_bytes_min << " .. " << r.image_bytes_max << " (mean " << mean << ")\n";
  }
  for (const auto& [extension, count] : r.members) out << "member ." << extension << "  in " << count << " samples\n";
  // ImageFolder.classes with class_to_idx: the label each class folder trains as.
  for (std::size_t label = 0; label < r.classes.size(); ++label) {
    const auto count = r.labels.find(static_cast<int64_t>(label));
    out << "class " << label << "       " << r.classes[label] << " (" << (count == r.labels.end() ? 0 : count->second)
        << " images)\n";
  }
  if (r.bad_message.empty())
    out << "first bad     none\n";
  else
    out << "first bad     " << r.bad_message << "\n";
  return out.str();
}

}  // namespace sdp
