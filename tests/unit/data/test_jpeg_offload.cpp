// BatchDecoder with a JpegOffload (data.decode: gpu; images/jpeg_offload.hpp), checked on the
// CPU through an offload that decodes on the host as the CPU path does, refuses what it is
// told to and calls some bytes corrupt: the batches equal the CPU path's bit for bit, the
// transforms it is handed are keyed by (seed, epoch, sample) alone, refusals fall back to the
// CPU and are counted, PNG and CMYK never reach it, and a corrupt JPEG follows
// data.on_bad_record.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <set>

#include "core/device_info.hpp"
#include "core/error.hpp"
#include "core/half_float.hpp"
#include "data/images/copy_runs.hpp"
#include "data/images/image_transforms.hpp"
#include "data/images/nvjpeg_offload.hpp"
#include "data/images/window_resample.hpp"
#include "data/loading/batch_decoder.hpp"
#include "data/sets/open_data.hpp"
#include "expect_input_error.hpp"
#include "image_samples.hpp"

namespace sdp {
namespace {

using testing::Bytes;

// Decodes on the host with the CPU path's own decoder (so its pixels are the CPU path's),
// refusing the images whose width is in `refuse` and calling those in `corrupt` corrupt.
class HostOffload : public JpegOffload {
 public:
  std::set<int> refuse, corrupt;
  std::vector<OffloadJob> seen;  // every job handed over, in order
  bool normalizes = false;       // takes set_normalization (data.normalize_on: gpu)

  std::string describe() const override { return "the test's host offload"; }
  bool set_normalization(const NormalizationTable& table) override {
    table_ = table;
    return normalizes;
  }
  std::vector<OffloadOutcome> decode(const std::vector<OffloadJob>& jobs) override {
    std::vector<OffloadOutcome> outcomes;
    for (const OffloadJob& job : jobs) {
      seen.push_back(job);
      if (refuse.count(job.width)) {
        outcomes.push_back(OffloadOutcome::kRefused);
        continue;
      }
      if (corrupt.count(job.width)) {
        outcomes.push_back(OffloadOutcome::kCorrupt);
        continue;
      }
      DecodedImage image = decoder_.decode_window(job.data, job.size, job.window, job.out_w, job.out_h, "job");
      if (job.flip) flip_horizontal(image.pixels.data(), job.out_w, job.out_h);
      if (job.normalized != nullptr) {
        EXPECT_TRUE(normalizes) << "a normalised slot for an offload that declined";
        normalize_with(table_, image.pixels.data(), job.out_w, job.out_h, job.normalized);
      } else {
        std::memcpy(job.out, image.pixels.data(), image.pixels.size());
      }
      outcomes.push_back(OffloadOutcome::kDecoded);
    }
    return outcomes;
  }

 private:
  ImageDecoder decoder_;
  NormalizationTable table_;
};

// Images of different widths (40 + 2 i) so the offload can pick them out by width.
std::vector<Bytes> jpegs(int count) {
  std::vector<Bytes> out;
  for (int i = 0; i < count; ++i) {
    const int w = 40 + 2 * i, h = 30 + i;
    out.push_back(testing::encode_jpeg(testing::gradient_rgb(w, h), w, h));
  }
  return out;
}

AugmentOptions imagenet_training(uint64_t seed) {
  AugmentOptions a;
  a.enabled = true;
  a.random_resized_crop = true;
  a.seed = seed;
  return a;
}

// Decodes samples `keys` (sample k's bytes: images[keys[k] % images.size()], label keys[k] % 3).
Batch decode_batch(BatchDecoder& decoder, const std::vector<Bytes>& images, const std::vector<int64_t>& keys,
                   int64_t epoch) {
  Batch batch;
  decoder.decode(
      keys, epoch,
      [&](int64_t k, std::vector<uint8_t>&, int64_t& label) -> const std::vector<uint8_t>& {
        const int64_t key = keys[static_cast<std::size_t>(k)];
        label = key % 3;
        return images[static_cast<std::size_t>(key) % images.size()];
      },
      [&](int64_t k) { return "sample " + std::to_string(keys[static_cast<std::size_t>(k)]); }, batch);
  return batch;
}

bool same_floats(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.data<float>(), b.data<float>(), a.nbytes()) == 0;
}

// The GPU decoder copies a batch's normalised samples back in runs: samples adjacent on both
// ends merge, a gap on either end (a refused or bad sample between) starts a new run, and every
// byte is copied once, to where it belongs.
TEST(JpegOffload, CopyRunsMergeSamplesAdjacentOnBothEnds) {
  std::vector<uint8_t> device(40), batch(64);
  for (std::size_t i = 0; i < device.size(); ++i) device[i] = static_cast<uint8_t>(i + 1);
  CopyRuns runs;
  // Samples of 8 bytes: 0 and 1 adjacent everywhere, sample 2 of the batch skipped (refused, its
  // slot filled on the CPU), then 3 and 4 adjacent again.
  runs.add(batch.data() + 0, device.data() + 0, 8);
  runs.add(batch.data() + 8, device.data() + 8, 8);
  runs.add(batch.data() + 24, device.data() + 16, 8);
  runs.add(batch.data() + 32, device.data() + 24, 8);
  runs.add(batch.data() + 48, device.data() + 40 - 8, 8);  // a gap in the batch only
  ASSERT_EQ(runs.runs.size(), 3u);
  EXPECT_EQ(runs.runs[0].bytes, 16u);
  EXPECT_EQ(runs.runs[1].bytes, 16u);
  EXPECT_EQ(runs.runs[2].bytes, 8u);
  for (const CopyRuns::Run& run : runs.runs) std::memcpy(run.dst, run.src, run.bytes);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(batch[i], device[i]) << i;
  for (int i = 16; i < 24; ++i) EXPECT_EQ(batch[i], 0) << "the skipped slot, " << i;
  for (int i = 24; i < 40; ++i) EXPECT_EQ(batch[i], device[i - 8]) << i;
  for (int i = 48; i < 56; ++i) EXPECT_EQ(batch[i], device[i - 16]) << i;
}

TEST(JpegOffload, BatchesEqualTheCpuPathAndRefusalsFallBack) {
  const std::vector<Bytes> images = jpegs(8);
  for (const AugmentOptions& augment : {imagenet_training(7), AugmentOptions{}}) {  // training and evaluation
    EncodedImageOptions options = testing::small_images(3);
    BatchDecoder cpu(options, 3, augment);
    auto offload = std::make_shared<HostOffload>();
    offload->refuse = {42, 48};  // images 1 and 4
    options.offload = offload;
    BatchDecoder offloaded(options, 3, augment);
    const std::vector<int64_t> keys = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int64_t epoch : {0, 3}) {
      const Batch expected = decode_batch(cpu, images, keys, epoch);
      const Batch got = decode_batch(offloaded, images, keys, epoch);
      EXPECT_TRUE(same_floats(expected.images, got.images)) << "epoch " << epoch;
      EXPECT_EQ(expected.labels, got.labels);
    }
    EXPECT_EQ(offloaded.cpu_decoded(), 4);  // 2 refused per batch, 2 batches
    EXPECT_EQ(offload->seen.size(), 16u);
    EXPECT_EQ(cpu.cpu_decoded(), 0);
  }
}

TEST(JpegOffload, TransformsAreKeyedBySeedEpochAndSampleAlone) {
  const std::vector<Bytes> images = jpegs(4);
  EncodedImageOptions options = testing::small_images(3);
  const AugmentOptions augment = imagenet_training(11);
  auto offload = std::make_shared<HostOffload>();
  options.offload = offload;
  BatchDecoder decoder(options, 3, augment);
  // The same samples in another order, in another batch: each gets its own box and flip.
  decode_batch(decoder, images, {0, 1, 2, 3}, 5);
  decode_batch(decoder, images, {3, 2, 1, 0}, 5);
  ASSERT_EQ(offload->seen.size(), 8u);
  for (std::size_t j = 0; j < 4; ++j) {
    const OffloadJob& first = offload->seen[j];
    const OffloadJob& again = offload->seen[7 - j];
    EXPECT_EQ(first.window.clamp, again.window.clamp) << "sample " << j;
    EXPECT_EQ(first.flip, again.flip);
    // What the CPU path draws for (seed 11, epoch 5, sample j): RandomResizedCrop, then the flip.
    std::mt19937_64 rng = sample_rng(11, 5, static_cast<int64_t>(j));
    const CropBox box = random_resized_crop_box(first.width, first.height, rng, options.crop);
    EXPECT_EQ(first.window.clamp, box);
    EXPECT_EQ(first.flip, random_flip(rng));
    EXPECT_EQ(first.out_w, 16);
  }
  // Another epoch draws again.
  decode_batch(decoder, images, {0, 1, 2, 3}, 6);
  int moved = 0;
  for (std::size_t j = 0; j < 4; ++j) moved += !(offload->seen[8 + j].window.clamp == offload->seen[j].window.clamp);
  EXPECT_GT(moved, 0);
}

TEST(JpegOffload, PngAndCmykStayOnTheCpu) {
  std::vector<Bytes> images = jpegs(2);
  images.push_back(testing::encode_png_rgb(testing::gradient_rgb(24, 20), 24, 20));
  const Bytes cmyk = testing::make_pixels(26, 20, 4, [](int x, int y, int c) { return (x * 9 + y * 5 + c * 40) % 256; });
  images.push_back(testing::encode_jpeg(cmyk, 26, 20, TJPF_CMYK, TJSAMP_444));
  EncodedImageOptions options = testing::small_images(3);
  BatchDecoder cpu(options, 3, AugmentOptions{});
  auto offload = std::make_shared<HostOffload>();
  options.offload = offload;
  BatchDecoder offloaded(options, 3, AugmentOptions{});
  const Batch expected = decode_batch(cpu, images, {0, 1, 2, 3}, 0);
  const Batch got = decode_batch(offloaded, images, {0, 1, 2, 3}, 0);
  EXPECT_TRUE(same_floats(expected.images, got.images));
  ASSERT_EQ(offload->seen.size(), 2u);  // the two colour JPEGs only
  EXPECT_EQ(offloaded.cpu_decoded(), 2);
}

TEST(JpegOffload, ACorruptJpegIsABadRecord) {
  const std::vector<Bytes> images = jpegs(4);
  EncodedImageOptions options = testing::small_images(3);
  auto offload = std::make_shared<HostOffload>();
  offload->corrupt = {44};  // image 2
  options.offload = offload;
  // data.on_bad_record: abort ends the job naming the sample and the decoder.
  BatchDecoder aborting(options, 3, AugmentOptions{});
  testing::expect_input_error([&] { decode_batch(aborting, images, {0, 1, 2, 3}, 0); },
                              {"sample 2", "corrupt JPEG", "the test's host offload"});
  // skip: replaced by the batch's first good sample, counted.
  options.skip_bad_records = true;
  BatchDecoder skipping(options, 3, AugmentOptions{});
  const Batch got = decode_batch(skipping, images, {0, 1, 2, 3}, 0);
  EXPECT_EQ(skipping.skipped(), 1);
  const int64_t per_image = 3 * 16 * 16;
  EXPECT_EQ(0, std::memcmp(got.images.data<float>() + 2 * per_image, got.images.data<float>(),
                           per_image * sizeof(float)));
  EXPECT_EQ(got.labels[2], got.labels[0]);
}

// On a GPU: nvJPEG's pixels against the CPU path's on the same crops. JPEG decoders differ in
// their IDCT and chroma upsampling, and the GPU emulates the CPU's DCT scaling by an area
// average: a few levels apart, on average under two.
// data.batch_type: compute. A 16-bit channels_last model's own input, NHWC in f16 or bf16,
// holds exactly the f32 NCHW batch's values rounded to nearest even (what the GPU's cast of
// the f32 batch gives), on the CPU path and the offloaded one, and a bad record's slot takes
// the first good sample as in f32.
TEST(JpegOffload, ComputeTypeBatchesAreTheF32BatchRoundedAndReordered) {
  std::vector<Bytes> images = jpegs(6);
  images[3] = Bytes(images[3].begin(), images[3].begin() + 40);  // truncated: a bad record
  for (DType dtype : {DType::kF16, DType::kBF16})
    for (bool offloaded : {false, true}) {
      EncodedImageOptions options = testing::small_images(3);
      options.skip_bad_records = true;
      if (offloaded) options.offload = std::make_shared<HostOffload>();
      BatchDecoder f32(options, 3, imagenet_training(5));
      options.batch_dtype = dtype;
      options.batch_channels_last = true;
      BatchDecoder compute(options, 3, imagenet_training(5));
      const std::vector<int64_t> keys = {0, 1, 2, 3, 4, 5};
      const Batch expected = decode_batch(f32, images, keys, 2);
      const Batch got = decode_batch(compute, images, keys, 2);
      const int64_t n = expected.images.dim(0), c = expected.images.dim(1), h = expected.images.dim(2),
                    w = expected.images.dim(3);
      ASSERT_EQ(got.images.dtype(), dtype);
      ASSERT_EQ(got.images.shape(), (Shape{n, h, w, c})) << "NHWC";
      EXPECT_EQ(got.labels, expected.labels);
      const float* x = expected.images.data<float>();
      const uint16_t* y = got.images.data<uint16_t>();
      int64_t differing = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t p = 0; p < h * w; ++p) {
            const float v = x[(i * c + ch) * h * w + p];
            const uint16_t want = dtype == DType::kF16 ? float_to_half(v) : float_to_bfloat16(v);
            differing += y[(i * h * w + p) * c + ch] != want;
          }
      EXPECT_EQ(differing, 0) << dtype_name(dtype) << (offloaded ? " offloaded" : " on the CPU");
      EXPECT_EQ(compute.skipped(), 1);
    }
}

// data.normalize_on: gpu: an offload that normalises writes each sample it decodes straight into
// the batch, and the batches are the loader-normalised ones bit for bit: f32 NCHW and f16/bf16
// NHWC, training (RandomResizedCrop) and evaluation, with refusals and a bad record. CIFAR's
// padded crop comes after the decode, so those samples reach the offload without a slot; an
// offload that declines gets none either.
TEST(JpegOffload, SamplesNormalisedByTheOffloadEqualTheLoaders) {
  std::vector<Bytes> images = jpegs(6);
  images[3] = Bytes(images[3].begin(), images[3].begin() + 40);  // truncated: a bad record
  AugmentOptions cifar;
  cifar.enabled = true;
  cifar.seed = 3;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16})
    for (const AugmentOptions& augment : {imagenet_training(5), AugmentOptions{}, cifar})
      for (bool normalizes : {true, false}) {
        EncodedImageOptions options = testing::small_images(3);
        options.skip_bad_records = true;
        options.batch_dtype = dtype;
        options.batch_channels_last = dtype != DType::kF32;
        BatchDecoder cpu(options, 3, augment);
        auto offload = std::make_shared<HostOffload>();
        offload->refuse = {42};  // image 1
        offload->normalizes = normalizes;
        options.offload = offload;
        options.normalize_on_offload = true;
        BatchDecoder offloaded(options, 3, augment);
        const std::vector<int64_t> keys = {0, 1, 2, 3, 4, 5};
        const Batch expected = decode_batch(cpu, images, keys, 2);
        const Batch got = decode_batch(offloaded, images, keys, 2);
        const std::string what = std::string(dtype_name(dtype)) + (augment.random_resized_crop ? " training"
                                                                   : augment.enabled ? " cifar"
                                                                                     : " evaluation") +
                                 (normalizes ? "" : ", offload declines");
        ASSERT_EQ(got.images.nbytes(), expected.images.nbytes()) << what;
        EXPECT_EQ(std::memcmp(got.images.raw(), expected.images.raw(), got.images.nbytes()), 0) << what;
        EXPECT_EQ(got.labels, expected.labels) << what;
        EXPECT_EQ(offloaded.skipped(), 1) << what;
        EXPECT_EQ(offloaded.cpu_decoded(), 1) << what;
        int64_t with_slot = 0;
        for (const OffloadJob& job : offload->seen) with_slot += job.normalized != nullptr;
        const bool slots = normalizes && !(augment.enabled && !augment.random_resized_crop);
        EXPECT_EQ(with_slot, slots ? static_cast<int64_t>(offload->seen.size()) : 0) << what;
      }
}

// With the GPU decoding, the loader's threads only read, parse and draw the transforms: at most
// 2 by default, whatever the rank's compute threads; data.workers still decides when set.
TEST(JpegOffload, GpuDecodingKeepsTwoLoaderThreadsByDefault) {
  DataSpec data;
  EXPECT_EQ(loader_workers(data, 12, /*gpu_decode=*/false), 12) << "the CPU decodes on the compute threads";
  EXPECT_EQ(loader_workers(data, 12, /*gpu_decode=*/true), kGpuDecodeWorkers);
  EXPECT_EQ(kGpuDecodeWorkers, 2);
  EXPECT_EQ(loader_workers(data, 1, /*gpu_decode=*/true), 1);
  EXPECT_EQ(loader_workers(data, 0, /*gpu_decode=*/false), 1);
  data.workers = 6;
  EXPECT_EQ(loader_workers(data, 12, /*gpu_decode=*/true), 6);
  EXPECT_EQ(loader_workers(data, 12, /*gpu_decode=*/false), 6);
}

// How far apart two f32 batches normalised as small_images does them ((x / 255 - 0.5) / 0.25)
// are, in 8-bit levels: the worst element and the mean.
struct LevelsApart {
  double worst = 0, mean = 0;
};
LevelsApart levels_apart(const Batch& expected, const Batch& got) {
  LevelsApart out;
  for (int64_t i = 0; i < got.images.numel(); ++i) {
    const double levels = std::abs(got.images.data<float>()[i] - expected.images.data<float>()[i]) * 0.25 * 255;
    out.worst = std::max(out.worst, levels);
    out.mean += levels / static_cast<double>(got.images.numel());
  }
  return out;
}

TEST(NvjpegOffload, PixelsMatchTheCpuPathWithinAFewLevels) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  if (!nvjpeg_status().available) GTEST_SKIP() << "no nvJPEG: " << nvjpeg_status().reason;
  std::vector<Bytes> images;
  for (int i = 0; i < 6; ++i) {  // photos' sizes and shapes: crops downscale by 1x to 8x
    const int w = 120 + 97 * i, h = 90 + 61 * i;
    images.push_back(testing::encode_jpeg(testing::gradient_rgb(w, h), w, h, TJPF_RGB, i % 2 ? TJSAMP_444 : TJSAMP_420, 90));
  }
  images.push_back(testing::encode_jpeg(testing::gradient_rgb(64, 48), 64, 48, TJPF_RGB, TJSAMP_420, 90,
                                        TJFLAG_PROGRESSIVE));  // the hardware decoder refuses it
  const Bytes gray = testing::make_pixels(300, 200, 1, [](int x, int y, int) { return (x * 255 / 299 + y * 255 / 199) / 2; });
  images.push_back(testing::encode_jpeg(gray, 300, 200, TJPF_GRAY));  // grey, replicated into R, G and B
  EncodedImageOptions options = testing::small_images(3);
  options.image_size = 56;
  options.resize = 64;
  // data.nvjpeg_backend: each backend this GPU and library create (the hardware decoder is an
  // A100's or H100's).
  for (const std::string backend : {"auto", "hardware", "gpu_hybrid", "nvjpeg_default"}) {
    for (const AugmentOptions& augment : {imagenet_training(3), AugmentOptions{}}) {
      EncodedImageOptions cpu_options = options;
      BatchDecoder cpu(cpu_options, 3, augment);
      try {
        options.offload = make_nvjpeg_offload(Device::cuda(0), false, backend);
      } catch (const InputError& e) {
        std::cout << "backend " << backend << " not created here: " << e.what() << "\n";
        continue;
      }
      BatchDecoder gpu(options, 3, augment);
      const std::vector<int64_t> keys = {0, 1, 2, 3, 4, 5, 6, 7};
      const Batch expected = decode_batch(cpu, images, keys, 1);
      const Batch got = decode_batch(gpu, images, keys, 1);
      ASSERT_EQ(expected.images.numel(), got.images.numel());
      const auto [worst, mean] = levels_apart(expected, got);
      // The resampling alone stays within 1.4 levels on average and 6 at worst
      // (WindowResample.FollowsTheCpuDecodeWindowWithinAFewLevels); the decoders' IDCT and
      // chroma upsampling add their own rounding.
      EXPECT_LE(worst, 16.0) << options.offload->describe();
      EXPECT_LE(mean, 2.0) << options.offload->describe();
      EXPECT_EQ(expected.labels, got.labels);
      options.offload = nullptr;
    }
  }
}

// data.decode_roi: on: the hardware decoder decodes each crop's source region alone, and the
// batches are the whole decodes' within a level or so (the decoders' chroma upsampling may
// differ at a region's edge); training crops and evaluation's centre crops, 4:2:0 and 4:4:4.
TEST(NvjpegOffload, RegionDecodingGivesTheWholeDecodesPixels) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  if (!nvjpeg_status().available) GTEST_SKIP() << "no nvJPEG: " << nvjpeg_status().reason;
  std::shared_ptr<JpegOffload> regions = make_nvjpeg_offload(Device::cuda(0), /*decode_regions=*/true);
  if (regions->describe().find("region") == std::string::npos)
    GTEST_SKIP() << "regions need nvJPEG's hardware decoder (A100, H100): " << regions->describe();
  std::vector<Bytes> images;
  for (int i = 0; i < 6; ++i) {
    const int w = 500 + 37 * i, h = 375 - 21 * i;
    images.push_back(testing::encode_jpeg(testing::gradient_rgb(w, h), w, h, TJPF_RGB, i % 2 ? TJSAMP_444 : TJSAMP_420, 90));
  }
  for (const AugmentOptions& augment : {imagenet_training(5), AugmentOptions{}}) {
    EncodedImageOptions options = testing::small_images(3);
    options.image_size = 224;
    options.resize = 256;
    options.offload = make_nvjpeg_offload(Device::cuda(0), false);
    BatchDecoder whole(options, 3, augment);
    options.offload = regions;
    BatchDecoder region(options, 3, augment);
    const std::vector<int64_t> keys = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    const Batch expected = decode_batch(whole, images, keys, 2);
    const Batch got = decode_batch(region, images, keys, 2);
    ASSERT_EQ(expected.images.numel(), got.images.numel());
    const auto [worst, mean] = levels_apart(expected, got);
    std::printf("region against whole decodes (%s): mean %.4f levels, worst %.1f\n",
                augment.enabled ? "training" : "evaluation", mean, worst);
    EXPECT_LE(mean, 0.1) << regions->describe();
    EXPECT_LE(worst, 8.0) << regions->describe();
    EXPECT_EQ(expected.labels, got.labels);
  }
}

// data.normalize_on: gpu on a GPU: nvJPEG's kernel writes the batch's values itself (f32 NCHW,
// f16 NHWC), the very values of the 8-bit crops normalised by the loader, bit for bit, the
// progressive image (refused by the hardware decoder) included.
TEST(NvjpegOffload, NormalisedInTheKernelAsByTheLoader) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU: " << cuda_unavailable_reason();
  if (!nvjpeg_status().available) GTEST_SKIP() << "no nvJPEG: " << nvjpeg_status().reason;
  std::vector<Bytes> images;
  for (int i = 0; i < 5; ++i) {
    const int w = 150 + 83 * i, h = 100 + 57 * i;
    images.push_back(testing::encode_jpeg(testing::gradient_rgb(w, h), w, h, TJPF_RGB, TJSAMP_420, 90));
  }
  images.push_back(testing::encode_jpeg(testing::gradient_rgb(64, 48), 64, 48, TJPF_RGB, TJSAMP_420, 90,
                                        TJFLAG_PROGRESSIVE));
  for (DType dtype : {DType::kF32, DType::kF16})
    for (const AugmentOptions& augment : {imagenet_training(9), AugmentOptions{}}) {
      EncodedImageOptions options = testing::small_images(3);
      options.image_size = 56;
      options.resize = 64;
      options.batch_dtype = dtype;
      options.batch_channels_last = dtype != DType::kF32;
      options.offload = make_nvjpeg_offload(Device::cuda(0));
      BatchDecoder loader_normalises(options, 3, augment);
      options.offload = make_nvjpeg_offload(Device::cuda(0));
      options.normalize_on_offload = true;
      BatchDecoder kernel_normalises(options, 3, augment);
      const std::vector<int64_t> keys = {0, 1, 2, 3, 4, 5};
      const Batch expected = decode_batch(loader_normalises, images, keys, 4);
      const Batch got = decode_batch(kernel_normalises, images, keys, 4);
      ASSERT_EQ(expected.images.nbytes(), got.images.nbytes());
      EXPECT_EQ(std::memcmp(expected.images.raw(), got.images.raw(), got.images.nbytes()), 0)
          << dtype_name(dtype) << (augment.enabled ? " training" : " evaluation");
      EXPECT_EQ(expected.labels, got.labels);
    }
}

}  // namespace
}  // namespace sdp

namespace sdp {
namespace {

// The GPU path's resampling (window_resample.hpp, the very per-pixel function the kernel
// runs) on a full decode, against the CPU path's DCT-scaled decode of the same window: the
// area average stands in for libjpeg's scaled IDCT, so this bounds what the GPU path adds
// beyond the two decoders' own rounding.
TEST(WindowResample, FollowsTheCpuDecodeWindowWithinAFewLevels) {
  // A photo-like pattern: a gradient with texture at several frequencies.
  const int w = 640, h = 480;
  const Bytes pixels = testing::make_pixels(w, h, 3, [&](int x, int y, int c) {
    const double v = 128 + 60 * std::sin(x * 0.05 + c) * std::cos(y * 0.07) + 30 * std::sin((x + 2 * y) * 0.31) +
                     (x * 40) / w - 20;
    return static_cast<int>(std::clamp(v, 0.0, 255.0));
  });
  const Bytes jpeg = testing::encode_jpeg(pixels, w, h, TJPF_RGB, TJSAMP_420, 90);
  ImageDecoder decoder;
  const DecodedImage full = decoder.decode(jpeg.data(), jpeg.size(), "test");
  std::mt19937_64 rng = sample_rng(5, 0, 0);
  double worst_mean = 0;
  int worst = 0;
  for (int trial = 0; trial < 40; ++trial) {
    // RandomResizedCrop boxes at 224 (DCT scales 1/8 to 8/8), and one evaluation window.
    const SampleWindow window = trial == 0 ? resize_shorter_then_center_crop(w, h, 256, 224).source_window(w, h)
                                           : SampleWindow::of_box(random_resized_crop_box(w, h, rng));
    const int out = 224;
    const DecodedImage cpu = decoder.decode_window(jpeg.data(), jpeg.size(), window, out, out, "test");
    std::vector<uint8_t> gpu(static_cast<std::size_t>(out) * out * 3);
    WindowResampleJob job;
    plan_window_resample(w, h, window.x, window.y, window.w, window.h, window.clamp.x, window.clamp.y, window.clamp.w,
                         window.clamp.h, out, out, job);
    job.src = full.pixels.data();
    job.pitch = static_cast<std::size_t>(w) * 3;
    job.out = gpu.data();
    resample_on_host(job);
    double total = 0;
    for (std::size_t i = 0; i < gpu.size(); ++i) {
      const int d = std::abs(int{gpu[i]} - int{cpu.pixels[i]});
      worst = std::max(worst, d);
      total += d;
    }
    worst_mean = std::max(worst_mean, total / static_cast<double>(gpu.size()));
  }
  std::printf("window resample against decode_window: worst mean %.3f levels, worst pixel %d\n", worst_mean, worst);
  // Measured 2026-11-26: a worst mean of 1.37 levels and a worst pixel of 6 over these 40 windows.
  EXPECT_LE(worst_mean, 2.0);
  EXPECT_LE(worst, 12);
}

}  // namespace
}  // namespace sdp

namespace sdp {
namespace {

// data.normalize_on: gpu: the per-pixel function the kernel runs writes, for each 8-bit value
// it would have written, that value's entry of the batch's table, in the batch's layout: the
// 8-bit resample normalised on the host (normalize_with), bit for bit, flipped or not.
TEST(WindowResample, NormalisedOutputIsTheTableOfTheEightBitOutput) {
  const int w = 97, h = 61;
  const Bytes pixels = testing::make_pixels(w, h, 3, [](int x, int y, int c) { return (x * 7 + y * 13 + c * 50) % 256; });
  const SampleWindow window = SampleWindow::of_box(CropBox{5, 3, 80, 50});
  for (TensorType type : {TensorType::kF32, TensorType::kF16, TensorType::kBF16})
    for (TensorLayout layout : {TensorLayout::kChw, TensorLayout::kHwc})
      for (int flip : {0, 1}) {
        const int out_w = 24, out_h = 20;
        WindowResampleJob job;
        plan_window_resample(w, h, window.x, window.y, window.w, window.h, window.clamp.x, window.clamp.y,
                             window.clamp.w, window.clamp.h, out_w, out_h, job);
        job.src = pixels.data();
        job.pitch = static_cast<std::size_t>(w) * 3;
        job.flip = flip;
        std::vector<uint8_t> eight_bit(static_cast<std::size_t>(out_w) * out_h * 3);
        job.out = eight_bit.data();
        resample_on_host(job);
        const NormalizationTable table = normalization_table(Normalization::imagenet(), layout, type);
        std::vector<uint8_t> expected(eight_bit.size() * table.element_bytes()), got(expected.size(), 0xAB);
        normalize_with(table, eight_bit.data(), out_w, out_h, expected.data());
        job.out = nullptr;
        job.normalized = got.data();
        job.table = table.values.data();
        job.element_bytes = table.element_bytes();
        job.hwc = layout == TensorLayout::kHwc ? 1 : 0;
        resample_on_host(job);
        EXPECT_EQ(got, expected) << "type " << static_cast<int>(type) << " layout " << static_cast<int>(layout)
                                 << " flip " << flip;
      }
}

}  // namespace
}  // namespace sdp

namespace sdp {
namespace {

// data.decode_roi: the kernel reads only window_source_rect's pixels, so a decode of that
// rectangle alone (src_x0/src_y0 at its corner) resamples to the whole decode's bits, at every
// DCT scale, flipped or not, and aligned to the decoder's blocks or not; and a crop's
// rectangle is smaller than the image (what the decoder is spared).
TEST(WindowResample, TheSourceRectangleAloneGivesTheWholeDecodesBits) {
  const int w = 500, h = 375;
  const Bytes pixels = testing::make_pixels(w, h, 3, [](int x, int y, int c) { return (x * 7 + y * 13 + c * 50) % 256; });
  std::mt19937_64 rng = sample_rng(11, 0, 0);
  double spared = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const SampleWindow window = trial == 0 ? resize_shorter_then_center_crop(w, h, 256, 224).source_window(w, h)
                                           : SampleWindow::of_box(random_resized_crop_box(w, h, rng));
    const int out = trial % 3 == 0 ? 224 : 64;  // 64: the smaller DCT scales
    WindowResampleJob job;
    plan_window_resample(w, h, window.x, window.y, window.w, window.h, window.clamp.x, window.clamp.y, window.clamp.w,
                         window.clamp.h, out, out, job);
    job.flip = trial % 2;
    std::vector<uint8_t> whole(static_cast<std::size_t>(out) * out * 3), part(whole.size());
    job.src = pixels.data();
    job.pitch = static_cast<std::size_t>(w) * 3;
    job.out = whole.data();
    resample_on_host(job);
    for (int align : {1, 16}) {
      const SourceRect rect = window_source_rect(job, align);
      ASSERT_TRUE(rect.x >= 0 && rect.y >= 0 && rect.w > 0 && rect.h > 0 && rect.x + rect.w <= w && rect.y + rect.h <= h);
      EXPECT_EQ(rect.x % align, 0);
      EXPECT_EQ(rect.y % align, 0);
      // The rectangle's pixels alone; what lies outside it is never read.
      std::vector<uint8_t> cut(static_cast<std::size_t>(rect.w) * rect.h * 3);
      for (int y = 0; y < rect.h; ++y)
        std::memcpy(&cut[static_cast<std::size_t>(y) * rect.w * 3], &pixels[(static_cast<std::size_t>(rect.y + y) * w + rect.x) * 3],
                    static_cast<std::size_t>(rect.w) * 3);
      WindowResampleJob roi = job;
      roi.src = cut.data();
      roi.pitch = static_cast<std::size_t>(rect.w) * 3;
      roi.src_x0 = rect.x;
      roi.src_y0 = rect.y;
      roi.out = part.data();
      resample_on_host(roi);
      EXPECT_EQ(part, whole) << "trial " << trial << " align " << align << " scale " << job.scale_num << "/8";
      if (align == 16) spared += 1.0 - static_cast<double>(rect.w) * rect.h / (static_cast<double>(w) * h);
    }
  }
  // RandomResizedCrop keeps 8 to 100 % of the area: on average the decoder is spared a good part.
  std::printf("source rectangles spare %.0f %% of the pixels on average\n", 100 * spared / 60);
  EXPECT_GT(spared / 60, 0.2);
}

}  // namespace
}  // namespace sdp
