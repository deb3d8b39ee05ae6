// The encoded sources of encoded_source.hpp: TFRecord files and image folders.
#include "data/sets/encoded_source.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.hpp"
#include "data/formats/data_files.hpp"
#include "data/formats/tf_example.hpp"
#include "data/formats/tfrecord.hpp"
#include "data/sets/image_folder.hpp"

namespace sdp {

namespace {

class TfRecordSource final : public EncodedSource {
 public:
  TfRecordSource(const std::string& path, const TfRecordSourceOptions& options) : path_(path), options_(options) {
    for (const std::string& file : list_data_files(path, "data.format tfrecord")) {
      if (tfrecord_is_gzip(file))
        throw InputError(file + ": a gzip-compressed TFRecord file has no record offsets to read samples by; "
                                "decompress it (gunzip) to train from it");
      files_.push_back(std::make_unique<TfRecordFile>(file));
      starts_.push_back(count_);
      count_ += files_.back()->size();
    }
  }

  std::string name() const override { return "tfrecord:" + path_; }
  int64_t count() const override { return count_; }

  int64_t read(int64_t i, std::vector<uint8_t>& bytes) const override {
    const auto [file, record] = locate(i);
    thread_local std::vector<uint8_t> payload;
    files_[file]->read(record, payload);
    ExampleFields fields;
    try {
      fields = parse_example(payload.data(), payload.size(), options_.image_key, options_.label_key);
    } catch (const InputError& e) {
      throw InputError(where(i) + ": " + e.what());
    }
    bytes = std::move(fields.image);
    return fields.label - options_.label_offset;
  }

  std::string where(int64_t i) const override {
    const auto [file, record] = locate(i);
    return files_[file]->path() + ": record " + std::to_string(record) + " (from 0)";
  }

 private:
  std::pair<std::size_t, int64_t> locate(int64_t i) const {
    const auto after = std::upper_bound(starts_.begin(), starts_.end(), i);
    const auto file = static_cast<std::size_t>(after - starts_.begin() - 1);
    return {file, i - starts_[file]};
  }

  std::string path_;
  TfRecordSourceOptions options_;
  std::vector<std::unique_ptr<TfRecordFile>> files_;
  std::vector<int64_t> starts_;  // the first sample of each file
  int64_t count_ = 0;
};

class ImageFolderSource final : public EncodedSource {
 public:
  explicit ImageFolderSource(const std::string& root) : root_(root), folder_(list_image_folder(root)) {}
  std::string name() const override { return "image-folder:" + root_; }
  int64_t count() const override { return static_cast<int64_t>(folder_.samples.size()); }
  int num_classes() const override { return static_cast<int>(folder_.classes.size()); }
  std::vector<std::string> class_names() const override { return folder_.classes; }
  int64_t read(int64_t i, std::vector<uint8_t>& bytes) const override {
    const ImageFolderSample& sample = folder_.samples[static_cast<std::size_t>(i)];
    read_whole_file(sample.path, bytes);
    return sample.label;
  }
  std::string where(int64_t i) const override { return folder_.samples[static_cast<std::size_t>(i)].path; }

 private:
  static void read_whole_file(const std::string& path, std::vector<uint8_t>& bytes) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) throw InputError(path + ": cannot open: " + std::strerror(errno));
    bytes.clear();
    uint8_t chunk[1 << 16];
    std::size_t got = 0;
    while ((got = std::fread(chunk, 1, sizeof chunk, f)) > 0) {
      if (bytes.size() + got > static_cast<std::size_t>(kMaxImageFileBytes)) {
        std::fclose(f);
        throw InputError(path + ": larger than " + std::to_string(kMaxImageFileBytes >> 20) + " MiB: not an image");
      }
      bytes.insert(bytes.end(), chunk, chunk + got);
    }
    const bool failed = std::ferror(f) != 0;
    std::fclose(f);
    if (failed) throw InputError(path + ": read error");
  }
  static constexpr int64_t kMaxImageFileBytes = int64_t{256} << 20;

  std::string root_;
  ImageFolder folder_;
};

}  // namespace

std::unique_ptr<EncodedSource> open_image_folder_source(const std::string& root) {
  return std::make_unique<ImageFolderSource>(root);
}

std::unique_ptr<EncodedSource> open_tfrecord_source(const std::string& path, const TfRecordSourceOptions& options) {
  return std::make_unique<TfRecordSource>(path, options);
}

}  // namespace sdp
