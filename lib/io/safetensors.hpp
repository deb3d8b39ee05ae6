// safetensors (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}},
// then the raw little-endian tensor bytes. Loadable with `safetensors.torch.load_file`.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace sdp {

struct SafetensorsContent {
  std::map<std::string, std::string> metadata;
  std::vector<NamedTensor> tensors;  // in file order
};

// Writes atomically (io/atomic_file.hpp). Throws RuntimeError on I/O failure.
void save_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata);

// Reads and validates the whole file. A malformed file throws InputError naming the path
// and what is wrong (header length, JSON, dtype, offsets, sizes).
SafetensorsContent load_safetensors(const std::string& path);

}  // namespace sdp
