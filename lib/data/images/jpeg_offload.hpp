// JpegOffload: JPEG decoding moved off the CPU (nvJPEG on the rank's GPU, data/images/
// nvjpeg_offload_cuda.cpp), for BatchDecoder (loading/batch_decoder.hpp). The loader's threads
// still read the records, parse the headers and draw each sample's transform; the offload
// decodes a whole batch of JPEGs at once, resizes each job's window to its output size and
// flips it, and leaves 8-bit interleaved RGB in the job's host slot. What it refuses (a
// format or layout its backend does not take) the CPU decodes, one by one; what it finds
// corrupt follows data.on_bad_record like any bad record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/images/image_resize.hpp"
#include "data/images/image_transforms.hpp"

namespace sdp {

struct OffloadJob {
  const uint8_t* data = nullptr;  // the JPEG's bytes (valid during decode())
  std::size_t size = 0;
  int width = 0, height = 0;  // the image's size (from its header)
  SampleWindow window;        // the source region, in the image's pixels
  int out_w = 0, out_h = 0;   // resized to this
  bool flip = false;          // then mirrored
  uint8_t* out = nullptr;     // out_w * out_h * 3 bytes of host memory
  // When set (an offload that took set_normalization), the decoded sample goes here instead,
  // normalised as the batch holds it: the sample's slot in the batch (host memory).
  void* normalized = nullptr;
};

enum class OffloadOutcome : uint8_t {
  kDecoded,  // `out` holds the pixels
  kRefused,  // not for this backend: the CPU decodes it
  kCorrupt,  // the decoder is sure the bytes are bad: a bad record without a CPU attempt
};

class JpegOffload {
 public:
  virtual ~JpegOffload() = default;
  // For the plan and the log: "nvJPEG 13.3 hardware backend on cuda:0".
  virtual std::string describe() const = 0;
  // Decodes every job; outcomes[i] says what became of jobs[i]. Called by one thread at a
  // time (each loader owns its offload). Throws sdp::Error only when the device fails.
  virtual std::vector<OffloadOutcome> decode(const std::vector<OffloadJob>& jobs) = 0;
  // data.normalize: gpu: from now on, jobs with `normalized` set are written there through
  // `table` (the loader's threads then only read and parse). False: this offload does not
  // normalise, and the loader normalises the 8-bit `out` as before.
  virtual bool set_normalization(const NormalizationTable& table) {
    (void)table;
    return false;
  }
};

}  // namespace sdp
