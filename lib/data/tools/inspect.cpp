#include "data/tools/inspect.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "core/bytes.hpp"
#include "core/error.hpp"
#include "data/formats/data_files.hpp"
#include "data/formats/tar_shards.hpp"
#include "data/formats/tf_example.hpp"
#include "data/formats/tfrecord.hpp"
#include "data/sets/image_folder.hpp"

namespace sdp {

namespace {

bool is_tar_name(const std::string& path) {
  return ends_with(path, ".tar") || ends_with(path, ".tar.gz") || ends_with(path, ".tgz");
}

std::string resolve_format(const std::vector<std::string>& files, const std::string& requested) {
  if (requested == "tfrecord" || requested == "tar-shards") return requested;
  if (requested != "auto")
    throw InputError("data inspect: --format " + requested + " is not one of auto, tfrecord, tar-shards, image-folder");
  if (is_tar_name(files.front())) return "tar-shards";
  if (looks_like_tfrecord(files.front())) return "tfrecord";
  throw InputError("data inspect: " + files.front() +
                   " is neither a tar shard (.tar, .tar.gz, .tgz) nor a TFRecord file; name the format with --format");
}

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
  result.format = resolve_format(result.files, options.format);
  Tally tally(result);
  for (const std::string& file : result.files) {
    const bool went_on = result.format == "tfrecord" ? inspect_tfrecord(file, options, tally, result)
                                                     : inspect_tar(file, options, tally, result);
    if (!went_on) {
      if (result.bad_message.empty()) result.complete = false;  // max_records reached
      break;
    }
  }
  return result;
}

std::string format_inspection(const DataInspection& r) {
  std::ostringstream out;
  out << "format        " << r.format << "\n";
  out << "files         " << r.files.size() << (r.files.size() == 1 ? " (" + r.files.front() + ")" : "") << "\n";
  out << "records       " << r.records << (r.complete ? "" : " (stopped at --max-records)") << "\n";
  if (!r.labels.empty()) {
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
