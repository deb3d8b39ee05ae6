#include "data/sets/cifar10.hpp"

#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "data/formats/compressed_file.hpp"
#include "data/formats/data_files.hpp"

namespace sdp {

namespace {

constexpr int kClasses = 10;
constexpr int kPixels = kCifarRecordBytes - 1;

std::vector<std::string> with_gz(const std::string& name) {
  return {name, name + ".gz"};
}

bool has_file(const std::string& dir, const std::string& name) {
  for (const std::string& n : with_gz(name))
    if (data_file_exists((std::filesystem::path(dir) / n).string())) return true;
  return false;
}

}  // namespace

Dataset load_cifar10_files(const std::vector<std::string>& paths, const std::string& name) {
  if (paths.empty()) throw InputError(name + ": no CIFAR-10 batch files given");
  Dataset ds;
  ds.name = name;
  ds.num_classes = kClasses;
  ds.channels = 3;
  ds.height = 32;
  ds.width = 32;
  ds.normalization = Normalization::cifar10();

  for (const std::string& path : paths) {
    // A standard batch is 10000 records (30 MB); 1 GiB is far beyond any real one.
    std::vector<uint8_t> raw = CompressedFile(path).read_all(int64_t{1} << 30);
    if (raw.empty() || raw.size() % kCifarRecordBytes != 0)
      throw InputError(path + ": size " + std::to_string(raw.size()) +
                       " bytes (uncompressed) is not a positive multiple of the " +
                       std::to_string(kCifarRecordBytes) + "-byte CIFAR-10 record");
    int64_t records = static_cast<int64_t>(raw.size()) / kCifarRecordBytes;
    std::size_t first_image = ds.images.size();
    ds.images.resize(first_image + records * kPixels);
    ds.labels.reserve(ds.labels.size() + records);
    for (int64_t r = 0; r < records; ++r) {
      const uint8_t* rec = raw.data() + r * kCifarRecordBytes;
      if (rec[0] >= kClasses)
        throw InputError(path + ": label byte " + std::to_string(rec[0]) + " of record " +
                         std::to_string(r) + " is outside 0-9");
      ds.labels.push_back(rec[0]);
      // The record is already planar RGB, which is our CHW layout.
      std::memcpy(ds.images.data() + first_image + r * kPixels, rec + 1, kPixels);
    }
    ds.count += records;
  }
  return ds;
}

Dataset load_cifar10(const std::string& dir, Split split) {
  std::vector<std::string> files;
  auto add = [&](const std::string& name) {
    files.push_back(find_first_file(dir, with_gz(name), "CIFAR-10 " + name));
  };
  bool official_test = has_file(dir, "test_batch.bin");
  if (split == Split::kTrain) {
    int last = official_test ? 5 : 4;
    for (int i = 1; i <= last; ++i) add("data_batch_" + std::to_string(i) + ".bin");
  } else {
    add(official_test ? "test_batch.bin" : "data_batch_5.bin");
  }
  return load_cifar10_files(files, std::string("cifar10/") + split_name(split));
}

}  // namespace sdp
