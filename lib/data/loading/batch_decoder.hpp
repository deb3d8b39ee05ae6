// BatchDecoder: encoded images (JPEG, PNG) decoded and transformed into a batch on a pool of
// worker threads, for the indexed encoded sets (encoded_images.hpp) and the streamed ones
// (stream_loader.hpp); encoded_images.hpp describes the transforms and the bad-record rule.
// With a JpegOffload (data.decode: gpu, images/jpeg_offload.hpp) the workers read, parse and
// draw each sample's transform, the offload decodes the batch's JPEGs, and the workers decode
// what it refused and normalise every sample: the same transforms, drawn the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/images/augment.hpp"
#include "data/images/jpeg_offload.hpp"
#include "data/images/image_transforms.hpp"
#include "data/loading/batch.hpp"
#include "data/sets/dataset.hpp"

namespace sdp {

struct EncodedImageOptions {
  int image_size = 224;  // the square crop the model reads
  int resize = 256;      // evaluation: the shorter side before the centre crop
  int num_classes = 0;   // labels must lie in [0, num_classes); the source's own count wins
  int workers = 1;       // decoding threads per loader, its own thread included
  // A sample that cannot be read or decoded: false ends the job (InputError); true replaces it
  // in its batch by a good sample of the same batch, warns naming it, and counts it.
  bool skip_bad_records = false;
  Normalization normalization = Normalization::imagenet();
  RandomResizedCropOptions crop;
  // Decodes the batches' JPEGs off the CPU (null: the workers decode everything).
  std::shared_ptr<JpegOffload> offload;
  // The batch's images: f32 NCHW, or (data.batch_type: compute, a 16-bit channels_last model)
  // f16 or bf16 NHWC, what the model's first layer reads.
  DType batch_dtype = DType::kF32;
  bool batch_channels_last = false;
  // data.normalize: gpu: the offload writes each sample it decodes straight into the batch,
  // normalised (JpegOffload::set_normalization); the workers only read and parse. Samples
  // with CIFAR's padded crop, and what the offload refuses, are finished here as before.
  bool normalize_on_offload = false;
};

// What one sample becomes, drawn from (augment.seed, epoch, key) and the image's size only,
// whichever path decodes it: the source window resized to image_size x image_size, then
// flipped (RandomResizedCrop's flip), then CIFAR's padded crop + flip (augment.pad).
struct SampleTransform {
  SampleWindow window;
  bool flip = false;
  bool pad_crop = false;
  CropFlip crop_flip;
};
// Training with augment.random_resized_crop: RandomResizedCrop's box and a flip; otherwise the
// evaluation Resize(resize) + CenterCrop(image_size) window, and with augment.enabled CIFAR's
// padded crop + flip after it.
SampleTransform plan_sample_transform(const EncodedImageOptions& options, const AugmentOptions& augment, int width,
                                      int height, int64_t key, int64_t epoch);

// `options` checked for a set named `set_name` whose labels lie in [0, num_classes), with at
// least one worker. Throws InputError when num_classes is not known (<= 0) or image_size and
// resize do not fit (1 <= image_size <= resize).
EncodedImageOptions checked_image_options(const std::string& set_name, EncodedImageOptions options, int num_classes);

// One loader's decoding of batches of encoded images (the indexed sets' assembler and the
// streamed sets' loaders share it): a pool of options.workers threads, each with its own
// decoder, applying the training or evaluation transform, with options.skip_bad_records.
class BatchDecoder {
 public:
  BatchDecoder(const EncodedImageOptions& options, int num_classes, const AugmentOptions& augment);
  ~BatchDecoder();
  BatchDecoder(const BatchDecoder&) = delete;
  BatchDecoder& operator=(const BatchDecoder&) = delete;

  // Sample k's encoded bytes (read into `scratch`, or a buffer of the caller's that stays valid
  // until decode() returns) and its label. Called by several workers at once. Throws
  // InputError naming the sample.
  using Read = std::function<const std::vector<uint8_t>&(int64_t k, std::vector<uint8_t>& scratch, int64_t& label)>;
  // Names sample k in an error: its file and record, or its path.
  using Where = std::function<std::string(int64_t k)>;

  // Decodes and transforms samples 0 .. keys.size() - 1 into out.images ([B, 3, S, S] f32, or
  // [B, S, S, 3] of options.batch_dtype when options.batch_channels_last; normalized) and out.labels; keys[k] and `epoch` key sample k's random augmentation.
  // out.indices is the caller's. Throws InputError for a bad sample (or, skipping, for a batch
  // with no good sample).
  void decode(const std::vector<int64_t>& keys, int64_t epoch, const Read& read, const Where& where, Batch& out);
  // Samples replaced so far (skip_bad_records).
  int64_t skipped() const;
  // With an offload: samples the workers decoded because the offload refused them or could
  // not take them (PNG, CMYK), so far.
  int64_t cpu_decoded() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace sdp
