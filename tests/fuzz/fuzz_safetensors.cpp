// Fuzzes the safetensors reader through read_checkpoint, which runs load_safetensors over the
// whole file (header length, JSON, dtypes, shapes, offsets, data) and then checks the
// checkpoint metadata on top: one target covers both readers of files from object storage.
#include <cstdint>

#include "core/error.hpp"
#include "fuzz_input.hpp"
#include "io/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = sdp::fuzz::write_file("ckpt-000000001.safetensors", data, size);
  try {
    sdp::Checkpoint c = sdp::read_checkpoint(path);
    // Touch every byte the reader claims to have loaded (ASan checks the bounds).
    volatile uint8_t sink = 0;
    for (const sdp::NamedTensor& t : c.tensors) {
      const auto* p = static_cast<const uint8_t*>(t.tensor.raw());
      for (size_t i = 0; i < t.tensor.nbytes(); ++i) sink = sink ^ p[i];
    }
  } catch (const sdp::InputError&) {
  }
  return 0;
}
