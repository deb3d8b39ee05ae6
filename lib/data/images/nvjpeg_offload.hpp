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

#include <cstdint>
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

// Where the GPU decoder's thread spends a batch (bench data prints it per batch): checking each
// JPEG's header and whether the backend takes it (the host parses the bitstream for the hardware
// decoder), nvJPEG's batched decode call (its host part; the device work runs on), queuing the
// resample kernel and the copies back, and waiting for the device. Summed over every offload of
// the process since it started; a caller takes differences.
struct NvjpegPhaseTotals {
  double inspect_s = 0, decode_call_s = 0, queue_s = 0, wait_s = 0;
  int64_t batches = 0, images = 0;
};
NvjpegPhaseTotals nvjpeg_phase_totals();
void add_nvjpeg_phase_times(const NvjpegPhaseTotals& batch);

// An offload on `device` (a GPU). Throws InputError naming data.decode when nvJPEG is not
// available or the device is not a GPU. `decode_regions` (data.decode_roi): on the hardware
// decoder, each image's decode covers only the pixels its crop is resampled from
// (window_source_rect, in 16 x 16 blocks), through nvjpegDecodeBatchedEx; where the decoder
// will not take a region, the whole image.
// `backend` (data.nvjpeg_backend): auto, hardware, gpu_hybrid or nvjpeg_default; a backend this
// GPU or library cannot create is an InputError naming the key.
std::shared_ptr<JpegOffload> make_nvjpeg_offload(const Device& device, bool decode_regions = false,
                                                 const std::string& backend = "auto");

}  // namespace sdp
