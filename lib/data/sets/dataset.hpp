// Dataset: a whole image classification split held in memory as the original uint8
// pixels, [N, C, H, W] planar, plus int32 labels. Keeping bytes (not floats) makes
// CIFAR-10 150 MB instead of 600 MB; batches are normalized when they are assembled.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sdp {

// Per-channel mean/std on the [0, 1] scale, applied as (x / 255 - mean) / std, the
// torchvision ToTensor + Normalize convention.
struct Normalization {
  std::vector<float> mean;
  std::vector<float> std;

  static Normalization mnist() { return {{0.1307f}, {0.3081f}}; }
  static Normalization cifar10() {
    return {{0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}};
  }
  static Normalization imagenet() { return {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}}; }
};

struct Dataset {
  std::string name;   // "mnist/train", "cifar10/test", "synthetic/train", ...
  int64_t count = 0;  // N
  int channels = 0;   // C
  int height = 0;     // H
  int width = 0;      // W
  int num_classes = 0;
  std::vector<uint8_t> images;  // N * C * H * W bytes, sample-major, then planar CHW
  std::vector<int32_t> labels;  // N, each in [0, num_classes)
  Normalization normalization;

  int64_t sample_bytes() const { return int64_t{channels} * height * width; }
  const uint8_t* image(int64_t i) const { return images.data() + i * sample_bytes(); }
  // Number of samples of each class (size num_classes).
  std::vector<int64_t> label_histogram() const;
  // Per-channel mean/std of the pixels on the [0, 1] scale (for data sets without
  // published statistics, e.g. synthetic ones).
  Normalization measure_normalization() const;
};

}  // namespace sdp
