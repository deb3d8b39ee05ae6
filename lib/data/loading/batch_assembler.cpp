#include "data/loading/batch_assembler.hpp"

#include <stdexcept>

#include "core/error.hpp"

namespace sdp {

BatchAssembler::BatchAssembler(const Dataset& dataset, const AugmentOptions& augment)
    : dataset_(dataset), augment_(augment) {
  const Normalization& norm = dataset.normalization;
  if (static_cast<int>(norm.mean.size()) != dataset.channels ||
      static_cast<int>(norm.std.size()) != dataset.channels)
    throw InputError(dataset.name + ": normalization has " + std::to_string(norm.mean.size()) +
                     " means and " + std::to_string(norm.std.size()) + " stds for " +
                     std::to_string(dataset.channels) + " channels");
  lut_.resize(dataset.channels * 256);
  for (int c = 0; c < dataset.channels; ++c)
    for (int v = 0; v < 256; ++v)
      lut_[c * 256 + v] = (static_cast<float>(v) / 255.0f - norm.mean[c]) / norm.std[c];
}

void BatchAssembler::assemble(const std::vector<int64_t>& indices, int64_t epoch,
                              Batch& out) {
  const Dataset& ds = dataset_;
  const int C = ds.channels, H = ds.height, W = ds.width;
  const int64_t plane = int64_t{H} * W;
  const int64_t b = static_cast<int64_t>(indices.size());
  out.shape_images(b, C, H, W);
  out.labels.resize(b);
  out.indices = indices;
  float* dst = out.images.data<float>();
  for (int64_t i = 0; i < b; ++i) {
    const int64_t index = indices[i];
    if (index < 0 || index >= ds.count)
      throw std::out_of_range("BatchAssembler: index " + std::to_string(index) + " outside " +
                              ds.name);
    out.labels[i] = ds.labels[index];
    const uint8_t* src = ds.image(index);
    float* d = dst + i * C * plane;
    if (!augment_.enabled) {
      for (int c = 0; c < C; ++c) {
        const float* lut = lut_.data() + c * 256;
        const uint8_t* s = src + c * plane;
        float* o = d + c * plane;
        for (int64_t p = 0; p < plane; ++p) o[p] = lut[s[p]];
      }
      continue;
    }
    const CropFlip cf = draw_crop_flip(augment_, epoch, index);
    const int pad = augment_.pad;
    for (int c = 0; c < C; ++c) {
      const float* lut = lut_.data() + c * 256;
      const uint8_t* s = src + c * plane;
      float* o = d + c * plane;
      const float zero = lut[0];  // the zero padding, normalized
      for (int y = 0; y < H; ++y) {
        const int sy = y + cf.dy - pad;
        float* orow = o + y * W;
        if (sy < 0 || sy >= H) {
          for (int x = 0; x < W; ++x) orow[x] = zero;
          continue;
        }
        const uint8_t* srow = s + int64_t{sy} * W;
        for (int x = 0; x < W; ++x) {
          const int sx = (cf.flip ? W - 1 - x : x) + cf.dx - pad;
          orow[x] = (sx < 0 || sx >= W) ? zero : lut[srow[sx]];
        }
      }
    }
  }
}

}  // namespace sdp
