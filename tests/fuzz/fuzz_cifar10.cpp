// Fuzzes the CIFAR-10 binary reader (load_cifar10_files), raw and gzip. Input layout:
//   byte 0: bit 0 set = the file is named data_batch_1.bin.gz (the seeds include gzip),
//   then the file's bytes.
#include <cstdint>

#include "core/error.hpp"
#include "data/sets/cifar10.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string name = (data[0] & 1) ? "data_batch_1.bin.gz" : "data_batch_1.bin";
  const std::string path = sdp::fuzz::write_file(name, data + 1, size - 1);
  try {
    sdp::Dataset ds = sdp::load_cifar10_files({path});
    if (ds.images.size() != static_cast<size_t>(ds.count) * 3 * 32 * 32 ||
        ds.labels.size() != static_cast<size_t>(ds.count))
      __builtin_trap();
  } catch (const sdp::InputError&) {
  }
  return 0;
}
