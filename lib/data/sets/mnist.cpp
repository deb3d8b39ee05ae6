#include "data/sets/mnist.hpp"

#include <cstdint>
#include <cstdio>

#include "core/error.hpp"
#include "data/formats/compressed_file.hpp"
#include "data/formats/data_files.hpp"

namespace sdp {

namespace {

constexpr uint32_t kImageMagic = 0x00000803;
constexpr uint32_t kLabelMagic = 0x00000801;
constexpr int kClasses = 10;

uint32_t read_be32(CompressedFile& file, const std::string& what) {
  uint8_t b[4];
  file.read_exact(b, 4, what);
  return uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 | uint32_t{b[2]} << 8 | uint32_t{b[3]};
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

void check_magic(CompressedFile& file, uint32_t expected, const char* kind) {
  uint32_t magic = read_be32(file, "IDX header");
  if (magic != expected)
    throw InputError(file.path() + ": wrong magic number " + hex(magic) + " (expected " +
                     hex(expected) + " for an IDX " + kind + " file)");
}

void check_no_trailing_bytes(CompressedFile& file) {
  if (!file.at_end())
    throw InputError(file.path() +
                     ": unexpected bytes after the data (file too long for "
                     "the count in its header)");
}

}  // namespace

Dataset load_mnist_files(const std::string& images_path, const std::string& labels_path,
                         const std::string& name) {
  Dataset ds;
  ds.name = name;
  ds.num_classes = kClasses;
  ds.channels = 1;
  ds.normalization = Normalization::mnist();

  {
    CompressedFile file(images_path);
    check_magic(file, kImageMagic, "image");
    uint32_t count = read_be32(file, "IDX header");
    uint32_t rows = read_be32(file, "IDX header");
    uint32_t cols = read_be32(file, "IDX header");
    // The pixels are read as they arrive (read_exact_into), so a header alone allocates
    // nothing; the total cap keeps a gzip bomb behind a plausible header from filling memory
    // (MNIST is 47 MB, EMNIST 0.6 GB).
    if (rows == 0 || cols == 0 || rows > 4096 || cols > 4096 || count > (1u << 28) ||
        uint64_t{count} * rows * cols > (uint64_t{4} << 30))
      throw InputError(images_path + ": implausible IDX dimensions " + std::to_string(count) +
                       " x " + std::to_string(rows) + " x " + std::to_string(cols));
    ds.count = count;
    ds.height = static_cast<int>(rows);
    ds.width = static_cast<int>(cols);
    // Not resized up front: the header's count is untrusted until the pixels are there.
    file.read_exact_into(ds.images, static_cast<int64_t>(count) * rows * cols,
                         std::to_string(count) + " images of " + std::to_string(rows) + "x" +
                             std::to_string(cols) + " pixels");
    check_no_trailing_bytes(file);
  }

  {
    CompressedFile file(labels_path);
    check_magic(file, kLabelMagic, "label");
    uint32_t count = read_be32(file, "IDX header");
    if (count != ds.count)
      throw InputError(labels_path + ": label count " + std::to_string(count) +
                       " does not match the image count " + std::to_string(ds.count) + " of " +
                       images_path);
    std::vector<uint8_t> raw;
    file.read_exact_into(raw, count, std::to_string(count) + " labels");
    check_no_trailing_bytes(file);
    ds.labels.resize(count);
    for (uint32_t i = 0; i < count; ++i) {
      if (raw[i] >= kClasses)
        throw InputError(labels_path + ": label " + std::to_string(raw[i]) + " of sample " +
                         std::to_string(i) + " is outside 0-9");
      ds.labels[i] = raw[i];
    }
  }
  return ds;
}

Dataset load_mnist(const std::string& dir, Split split) {
  std::string prefix = split == Split::kTrain ? "train" : "t10k";
  auto names = [&](const std::string& kind) {
    std::string dash = prefix + "-" + kind + "-ubyte";
    std::string dot = prefix + "-" + kind;
    dot.replace(dot.rfind('-'), 1, ".");  // train-images.idx3-ubyte
    dot += "-ubyte";
    return std::vector<std::string>{dash, dash + ".gz", dot, dot + ".gz"};
  };
  std::string images = find_first_file(dir, names("images-idx3"),
                                       "MNIST " + std::string(split_name(split)) + " images");
  std::string labels = find_first_file(dir, names("labels-idx1"),
                                       "MNIST " + std::string(split_name(split)) + " labels");
  return load_mnist_files(images, labels, std::string("mnist/") + split_name(split));
}

}  // namespace sdp
