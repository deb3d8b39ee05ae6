// data.decode: gpu's JpegOffload (jpeg_offload.hpp): nvJPEG's batched decode on the rank's
// GPU, the A100/H100 hardware decoder where the GPU has one (NVJPEG_BACKEND_HARDWARE), the
// GPU-assisted backend elsewhere. Each batch: the JPEGs the backend takes are decoded whole
// (or, with decode_regions, each crop's source region) into device memory; one kernel then resamples each job's window to its output size as the
// CPU path does (the DCT scale n/8 the CPU decoder would pick, emulated by an area average,
// then torchvision's bilinear step), flips it, and the 8-bit RGB comes back to the job's host
// slot. What the backend does not take (progressive scans on the hardware decoder, 4:1:0
// and 4:1:1 chroma) and what it fails to parse or decode is refused: the CPU decodes it, and
// its decoder decides whether the bytes are bad, as on the CPU path. libnvjpeg.so.13 (PyPI's nvidia-nvjpeg) is loaded at run time, so a machine without
// it still runs every other path; the build needs nvjpeg.h (scripts/install-deps.sh).
#pragma once

#include <memory>
#include <string>

#include "core/dtype.hpp"
#include "data/images/jpeg_offload.hpp"

namespace sdp {

// Whether this process can decode on a GPU: the library's version and path, or why not.
struct NvjpegStatus {
  bool available = false;
  std::string version;  // "13.3.2"
  std::string path;     // the libnvjpeg.so.13 loaded
  std::string reason;   // why not (no CUDA backend, no nvjpeg.h at build time, no library)
};
// Loads the library once; later calls return the same answer.
const NvjpegStatus& nvjpeg_status();

// An offload on `device` (a GPU). Throws InputError naming data.decode when nvJPEG is not
// available or the device is not a GPU. `decode_regions` (data.decode_roi): on the hardware
// decoder, each image's decode covers only the pixels its crop is resampled from
// (window_source_rect, in 16 x 16 blocks), through nvjpegDecodeBatchedEx; where the decoder
// will not take a region, the whole image.
std::shared_ptr<JpegOffload> make_nvjpeg_offload(const Device& device, bool decode_regions = false);

}  // namespace sdp
