// The ImageNet-style transforms around the decoder (docs/data-formats.md): torchvision's
// RandomResizedCrop box, the evaluation Resize(shorter side) + CenterCrop box, the horizontal
// flip and the normalisation of decoded RGB bytes into the model's input tensor. The boxes
// feed ImageDecoder::decode_crop / decode_window, which resize while decoding.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "data/sets/dataset.hpp"
#include "data/images/image_decode.hpp"

namespace sdp {

// The generator of one sample's random choices: a function of (seed, epoch, sample) only, so
// the crop does not depend on which thread or rank decodes it, and a resumed run draws what
// an uninterrupted one would.
std::mt19937_64 sample_rng(uint64_t seed, int64_t epoch, int64_t sample);

struct RandomResizedCropOptions {
  double scale_min = 0.08;  // fraction of the image area
  double scale_max = 1.0;
  double ratio_min = 3.0 / 4.0;  // width / height
  double ratio_max = 4.0 / 3.0;
};

// torchvision's RandomResizedCrop.get_params: up to 10 draws of an area fraction (uniform)
// and an aspect ratio (log-uniform), rounded half to even like Python's round(), the first
// that fits placed uniformly; otherwise the centre crop of the whole image clamped to the
// ratio range (random_resized_crop_fallback).
CropBox random_resized_crop_box(int width, int height, std::mt19937_64& rng,
                                const RandomResizedCropOptions& options = {});
CropBox random_resized_crop_fallback(int width, int height,
                                     const RandomResizedCropOptions& options = {});

// Flip with probability 1/2 (RandomHorizontalFlip), from the same generator.
inline bool random_flip(std::mt19937_64& rng) {
  return (rng() >> 63) != 0;
}

// torchvision's Resize(resize_shorter) (int size: the shorter side becomes resize_shorter,
// the longer int(resize_shorter * long / short), truncated) then CenterCrop(crop_size)
// (origin int(round((resized - crop) / 2)), half to even). resized_* is the size after the
// resize, `crop` the box in it.
struct ResizeCenterCrop {
  int resized_w = 0;
  int resized_h = 0;
  CropBox crop;
  // The same, as a window of the original width x height image for decode_window: sampling
  // it reproduces resize-then-crop (coordinates clamped to the whole image, as the resize
  // saw it).
  SampleWindow source_window(int width, int height) const;
};
ResizeCenterCrop resize_shorter_then_center_crop(int width, int height, int resize_shorter = 256,
                                                 int crop_size = 224);

// Mirrors each row of an interleaved RGB image in place.
void flip_horizontal(uint8_t* rgb, int width, int height);

enum class TensorLayout {
  kChw,  // planar: all R, then all G, then all B (PyTorch's default)
  kHwc,  // channels-last (NHWC per sample)
};
enum class TensorType { kF32, kF16, kBF16 };

// Every value the normalisation can produce: per channel, the 256 results of
// (x / 255 - mean) / std computed in float exactly as torchvision's ToTensor + Normalize
// computes them, stored as the batch holds them (float, or uint16_t holding f16 / bf16 bits
// rounded to nearest even as core/half_float.hpp does). Entry c * 256 + x; the GPU decoder's
// kernel (window_resample.hpp) reads the same table, so both devices write the same values.
struct NormalizationTable {
  TensorLayout layout = TensorLayout::kChw;
  TensorType type = TensorType::kF32;
  std::vector<uint8_t> values;  // 3 * 256 elements of element_bytes()
  int element_bytes() const { return type == TensorType::kF32 ? 4 : 2; }
};
// `norm` must have 3 channels.
NormalizationTable normalization_table(const Normalization& norm, TensorLayout layout, TensorType type);

// An interleaved RGB image normalised through `table` into `out` (width * height * 3
// elements in the table's layout and type).
void normalize_with(const NormalizationTable& table, const uint8_t* rgb, int width, int height, void* out);

// normalize_with(normalization_table(norm, layout, type), ...).
void normalize_image(const uint8_t* rgb, int width, int height, const Normalization& norm,
                     TensorLayout layout, TensorType type, void* out);

}  // namespace sdp
