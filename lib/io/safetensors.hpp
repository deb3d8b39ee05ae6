// safetensors (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}},
// then the raw little-endian tensor bytes. Loadable with `safetensors.torch.load_file`.
//
// Checksums: every file we write carries the CRC-32C (core/crc32c.hpp) of each tensor's bytes
// and of the metadata, in the metadata under kChecksumsKey (a JSON object of 8-digit hex
// values: tensor name -> CRC, "__metadata__" -> CRC of the other metadata entries), so that
// other loaders still read the file (they ignore metadata) while ours verify every byte, as
// TensorFlow's checkpoints carry a CRC-32C per tensor slice. A file without the key (written
// before sdp-train checked them, or by another tool) loads unverified and says so.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace sdp {

inline constexpr const char* kChecksumsKey = "crc32c";

struct SafetensorsContent {
  std::map<std::string, std::string> metadata;  // without kChecksumsKey
  std::vector<NamedTensor> tensors;             // in file order
  bool checksummed = false;  // the file carried checksums (and every one matched)
};

// Writes atomically (io/atomic_file.hpp), with the checksums. `metadata` may not use
// kChecksumsKey. Throws RuntimeError on I/O failure.
void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata);

// Reads and validates the whole file. A malformed file throws InputError naming the path
// and what is wrong (header length, JSON, dtype, offsets, sizes); a damaged one (a checksum
// that does not match) names the tensor, or the metadata.
SafetensorsContent load_safetensors(const std::string& path);

}  // namespace sdp
