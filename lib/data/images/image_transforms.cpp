#include "data/images/image_transforms.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/half_float.hpp"
#include "data/loading/random.hpp"

namespace sdp {

std::mt19937_64 sample_rng(uint64_t seed, int64_t epoch, int64_t sample) {
  return std::mt19937_64(mix_keys(seed ^ random_stream::kImageTransform, static_cast<uint64_t>(epoch),
                                  static_cast<uint64_t>(sample)));
}

namespace {

// Python's round() on a float: half to even (the default rounding mode of nearbyint).
int round_half_even(double v) {
  return static_cast<int>(std::nearbyint(v));
}

void check_size(int width, int height) {
  if (width <= 0 || height <= 0)
    throw std::invalid_argument("image transform of an empty image (" + std::to_string(width) +
                                "x" + std::to_string(height) + ")");
}

}  // namespace

CropBox random_resized_crop_fallback(int width, int height,
                                     const RandomResizedCropOptions& options) {
  check_size(width, height);
  const double in_ratio = double(width) / double(height);
  int w = width, h = height;
  if (in_ratio < options.ratio_min) {
    h = round_half_even(w / options.ratio_min);
  } else if (in_ratio > options.ratio_max) {
    w = round_half_even(h * options.ratio_max);
  }
  // Python's // on non-negative ints is C++'s /.
  return {(width - w) / 2, (height - h) / 2, w, h};
}

CropBox random_resized_crop_box(int width, int height, std::mt19937_64& rng,
                                const RandomResizedCropOptions& options) {
  check_size(width, height);
  const double area = double(width) * height;
  const double log_min = std::log(options.ratio_min), log_max = std::log(options.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area =
        area * (options.scale_min + (options.scale_max - options.scale_min) * uniform01(rng));
    const double aspect = std::exp(log_min + (log_max - log_min) * uniform01(rng));
    const int w = round_half_even(std::sqrt(target_area * aspect));
    const int h = round_half_even(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      // torch.randint(0, height - h + 1) draws the row first, then the column.
      const int y = static_cast<int>(uniform_below(rng, uint64_t(height - h) + 1));
      const int x = static_cast<int>(uniform_below(rng, uint64_t(width - w) + 1));
      return {x, y, w, h};
    }
  }
  return random_resized_crop_fallback(width, height, options);
}

ResizeCenterCrop resize_shorter_then_center_crop(int width, int height, int resize_shorter,
                                                 int crop_size) {
  check_size(width, height);
  if (resize_shorter <= 0 || crop_size <= 0 || crop_size > resize_shorter)
    throw std::invalid_argument("resize_shorter_then_center_crop: crop " +
                                std::to_string(crop_size) + " larger than the resize " +
                                std::to_string(resize_shorter));
  ResizeCenterCrop r;
  // int(size * long / short) in Python: the quotient of two integers this small is never
  // rounded across an integer by the double division, so integer division gives the same.
  const int64_t shorter = std::min(width, height), longer = std::max(width, height);
  const int new_long = static_cast<int>(int64_t{resize_shorter} * longer / shorter);
  r.resized_w = width <= height ? resize_shorter : new_long;
  r.resized_h = width <= height ? new_long : resize_shorter;
  r.crop = {round_half_even((r.resized_w - crop_size) / 2.0),
            round_half_even((r.resized_h - crop_size) / 2.0), crop_size, crop_size};
  return r;
}

SampleWindow ResizeCenterCrop::source_window(int width, int height) const {
  const double sx = double(width) / resized_w, sy = double(height) / resized_h;
  SampleWindow w;
  w.x = crop.x * sx;
  w.y = crop.y * sy;
  w.w = crop.w * sx;
  w.h = crop.h * sy;
  w.clamp = {0, 0, width, height};
  return w;
}

void flip_horizontal(uint8_t* rgb, int width, int height) {
  for (int y = 0; y < height; ++y) {
    uint8_t* row = rgb + size_t(y) * width * 3;
    for (int l = 0, r = width - 1; l < r; ++l, --r)
      for (int c = 0; c < 3; ++c) std::swap(row[l * 3 + c], row[r * 3 + c]);
  }
}

namespace {

template <typename T>
void normalize_with_table(const uint8_t* rgb, size_t pixels, const T* table, TensorLayout layout, T* out) {
  const T* r_of = table;
  const T* g_of = table + 256;
  const T* b_of = table + 512;
  if (layout == TensorLayout::kHwc) {
    for (size_t i = 0; i < pixels * 3; i += 3) {
      out[i] = r_of[rgb[i]];
      out[i + 1] = g_of[rgb[i + 1]];
      out[i + 2] = b_of[rgb[i + 2]];
    }
    return;
  }
  T* r = out;
  T* g = out + pixels;
  T* b = out + 2 * pixels;
  for (size_t i = 0; i < pixels; ++i) {
    r[i] = r_of[rgb[3 * i]];
    g[i] = g_of[rgb[3 * i + 1]];
    b[i] = b_of[rgb[3 * i + 2]];
  }
}

}  // namespace

NormalizationTable normalization_table(const Normalization& norm, TensorLayout layout, TensorType type) {
  if (norm.mean.size() != 3 || norm.std.size() != 3)
    throw std::invalid_argument("normalize_image: RGB needs 3 means and 3 stds");
  NormalizationTable table;
  table.layout = layout;
  table.type = type;
  table.values.resize(static_cast<size_t>(3 * 256 * table.element_bytes()));
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) {
      const float value = (static_cast<float>(v) / 255.0f - norm.mean[c]) / norm.std[c];
      const size_t at = static_cast<size_t>(c * 256 + v);
      if (type == TensorType::kF32) {
        std::memcpy(table.values.data() + at * 4, &value, 4);
      } else {
        const uint16_t bits = type == TensorType::kF16 ? float_to_half(value) : float_to_bfloat16(value);
        std::memcpy(table.values.data() + at * 2, &bits, 2);
      }
    }
  return table;
}

void normalize_with(const NormalizationTable& table, const uint8_t* rgb, int width, int height, void* out) {
  const size_t pixels = size_t(width) * height;
  if (table.type == TensorType::kF32) {
    float values[3 * 256];
    std::memcpy(values, table.values.data(), sizeof values);
    normalize_with_table(rgb, pixels, values, table.layout, static_cast<float*>(out));
    return;
  }
  uint16_t values[3 * 256];
  std::memcpy(values, table.values.data(), sizeof values);
  normalize_with_table(rgb, pixels, values, table.layout, static_cast<uint16_t*>(out));
}

void normalize_image(const uint8_t* rgb, int width, int height, const Normalization& norm,
                     TensorLayout layout, TensorType type, void* out) {
  normalize_with(normalization_table(norm, layout, type), rgb, width, height, out);
}

}  // namespace sdp
