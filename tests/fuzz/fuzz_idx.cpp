// Fuzzes the MNIST IDX reader (load_mnist_files), raw and gzip. Input layout:
//   byte 0: bit 0 set = both files are named *.gz (the bytes must then be gzip themselves:
//           the seeds are), bytes 1-2: little-endian length of the image file,
//   then the image file's bytes, then the label file's bytes.
#include <algorithm>
#include <cstdint>

#include "core/error.hpp"
#include "data/sets/mnist.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const bool gz = data[0] & 1;
  const size_t image_len = std::min<size_t>(data[1] | size_t{data[2]} << 8, size - 3);
  const uint8_t* images = data + 3;
  const uint8_t* labels = images + image_len;
  const size_t label_len = size - 3 - image_len;
  const std::string suffix = gz ? ".gz" : "";
  const std::string image_path =
      sdp::fuzz::write_file("images-idx3-ubyte" + suffix, images, image_len);
  const std::string label_path =
      sdp::fuzz::write_file("labels-idx1-ubyte" + suffix, labels, label_len);
  try {
    sdp::Dataset ds = sdp::load_mnist_files(image_path, label_path);
    if (ds.images.size() != static_cast<size_t>(ds.count) * ds.height * ds.width ||
        ds.labels.size() != static_cast<size_t>(ds.count))
      __builtin_trap();  // the Dataset must be consistent with what the reader accepted
  } catch (const sdp::InputError&) {
  }
  return 0;
}
