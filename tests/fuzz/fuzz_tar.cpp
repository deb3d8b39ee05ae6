// Fuzzes the WebDataset tar reader (TarShardReader over TarReader). Input layout:
//   byte 0: bit 0 set = the file is named *.tar.gz (the bytes must then be gzip themselves:
//           the seeds are); bit 1 set = read as archives back to back (a Pipe-mode FIFO:
//           zero blocks skipped); then the file's bytes.
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "data/formats/tar_shards.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool gz = data[0] & 1;
  const bool concatenated = data[0] & 2;
  const std::string path =
      sdp::fuzz::write_file(gz ? "shard.tar.gz" : "shard.tar", data + 1, size - 1);
  try {
    sdp::TarShardReader reader(path, concatenated);
    sdp::TarSample sample;
    std::string previous_key;
    bool first = true;
    while (reader.next(sample)) {
      // A sample has a key and files, and consecutive samples differ in key.
      if (sample.key.empty() || sample.files.empty() || (!first && sample.key == previous_key))
        __builtin_trap();
      previous_key = sample.key;
      first = false;
    }
  } catch (const sdp::InputError&) {
  }
  return 0;
}
