#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/half_float.hpp"
#include "data/images/image_transforms.hpp"
#include "image_samples.hpp"

namespace sdp {
namespace {

using testing::Bytes;

TEST(RandomResizedCrop, BoxesLieInTheImageWithinScaleAndRatio) {
  const int width = 500, height = 375;
  const double area = double(width) * height;
  double min_fraction = 1, max_fraction = 0;
  for (int64_t sample = 0; sample < 5000; ++sample) {
    std::mt19937_64 rng = sample_rng(11, 0, sample);
    const CropBox b = random_resized_crop_box(width, height, rng);
    ASSERT_GE(b.x, 0);
    ASSERT_GE(b.y, 0);
    ASSERT_GT(b.w, 0);
    ASSERT_GT(b.h, 0);
    ASSERT_LE(b.x + b.w, width);
    ASSERT_LE(b.y + b.h, height);
    // w and h are rounded to integers: some real (w', h') within half a pixel must satisfy
    // the drawn constraints.
    EXPECT_GE((b.w + 0.5) * (b.h + 0.5) / area, 0.08) << sample;
    EXPECT_LE((b.w - 0.5) * (b.h - 0.5) / area, 1.0) << sample;
    EXPECT_GE((b.w + 0.5) / (b.h - 0.5), 3.0 / 4.0) << sample;
    EXPECT_LE((b.w - 0.5) / (b.h + 0.5), 4.0 / 3.0) << sample;
    min_fraction = std::min(min_fraction, b.w * b.h / area);
    max_fraction = std::max(max_fraction, b.w * b.h / area);
  }
  // The whole range is used.
  EXPECT_LT(min_fraction, 0.1);
  EXPECT_GT(max_fraction, 0.9);
}

TEST(RandomResizedCrop, SameSeedEpochSampleGiveTheSameBox) {
  int same_other_epoch = 0;
  for (int64_t sample = 0; sample < 200; ++sample) {
    std::mt19937_64 a = sample_rng(3, 7, sample), b = sample_rng(3, 7, sample),
                    c = sample_rng(3, 8, sample);
    const CropBox ba = random_resized_crop_box(640, 480, a),
                  bb = random_resized_crop_box(640, 480, b);
    EXPECT_EQ(ba, bb);
    EXPECT_EQ(random_flip(a), random_flip(b));
    same_other_epoch += ba == random_resized_crop_box(640, 480, c);
  }
  EXPECT_LT(same_other_epoch, 5);
}

TEST(RandomResizedCrop, ExtremeAspectImagesFallBackToTheClampedCentreCrop) {
  // A 1000x10 strip: every draw needs h >= sqrt(0.08 * 10000 / (4/3)) = 24.5 > 10 rows, so
  // all 10 attempts fail. Fallback: h = 10, w = round(10 * 4/3) = 13, centred.
  for (int64_t sample = 0; sample < 50; ++sample) {
    std::mt19937_64 rng = sample_rng(1, 0, sample);
    EXPECT_EQ(random_resized_crop_box(1000, 10, rng), (CropBox{493, 0, 13, 10}));
    EXPECT_EQ(random_resized_crop_box(10, 1000, rng), (CropBox{0, 493, 10, 13}));
  }
  // Inside the ratio range the fallback is the whole image.
  EXPECT_EQ(random_resized_crop_fallback(400, 300), (CropBox{0, 0, 400, 300}));
  // 300x100 (ratio 3): w = round(100 * 4/3) = 133, x = (300 - 133) // 2 = 83.
  EXPECT_EQ(random_resized_crop_fallback(300, 100), (CropBox{83, 0, 133, 100}));
}

TEST(ResizeCenterCrop, MatchesTorchvisionResizeAndCenterCrop) {
  struct Case {
    int w, h, resized_w, resized_h, x, y;
  };
  // By hand from torchvision's formulas: new_long = int(256 * long / short); crop origin
  // int(round((size - 224) / 2)) with Python's half-to-even round.
  const Case cases[] = {
      {500, 375, 341, 256, 58, 16},  // 341.33 -> 341; round(58.5) = 58
      {375, 500, 256, 341, 16, 58},  // portrait
      {256, 256, 256, 256, 16, 16},   {257, 256, 257, 256, 16, 16},  // round(16.5) = 16
      {1000, 300, 853, 256, 314, 16},  // 853.33 -> 853; round(314.5) = 314
      {301, 1000, 256, 850, 16, 313},  // 850.498 -> 850
      {100, 50, 512, 256, 144, 16},    // upscale
  };
  for (const Case& c : cases) {
    const ResizeCenterCrop r = resize_shorter_then_center_crop(c.w, c.h);
    EXPECT_EQ(r.resized_w, c.resized_w) << c.w << "x" << c.h;
    EXPECT_EQ(r.resized_h, c.resized_h) << c.w << "x" << c.h;
    EXPECT_EQ(r.crop, (CropBox{c.x, c.y, 224, 224})) << c.w << "x" << c.h;
  }
  EXPECT_THROW(resize_shorter_then_center_crop(10, 10, 100, 200), std::invalid_argument);
}

TEST(ResizeCenterCrop, SourceWindowReproducesResizeThenCrop) {
  const int w = 150, h = 100;
  const Bytes src = testing::gradient_rgb(w, h);
  const ResizeCenterCrop rc = resize_shorter_then_center_crop(w, h, 64, 56);
  // Reference: resize the whole image, then crop.
  Bytes resized(size_t(rc.resized_w) * rc.resized_h * 3);
  resize_bilinear(src.data(), w, h, w * 3, SampleWindow::of_box({0, 0, w, h}), resized.data(),
                  rc.resized_w, rc.resized_h);
  Bytes direct(56 * 56 * 3);
  resize_bilinear(src.data(), w, h, w * 3, rc.source_window(w, h), direct.data(), 56, 56);
  int worst = 0;
  for (int y = 0; y < 56; ++y)
    for (int x = 0; x < 56; ++x)
      for (int c = 0; c < 3; ++c) {
        const int expected =
            resized[((size_t(y) + rc.crop.y) * rc.resized_w + x + rc.crop.x) * 3 + c];
        worst = std::max(worst, std::abs(expected - int(direct[(size_t(y) * 56 + x) * 3 + c])));
      }
  EXPECT_LE(worst, 1);  // the two differ only in floating-point rounding of the coordinates
}

TEST(FlipHorizontal, MirrorsEachRow) {
  Bytes img =
      testing::make_pixels(3, 2, 3, [](int x, int y, int c) { return y * 100 + x * 10 + c; });
  flip_horizontal(img.data(), 3, 2);
  EXPECT_EQ(img, testing::make_pixels(
                     3, 2, 3, [](int x, int y, int c) { return y * 100 + (2 - x) * 10 + c; }));
}

TEST(NormalizeImage, ComputesToTensorThenNormalize) {
  const Normalization imagenet{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
  // Two pixels: (255, 0, 128) and (0, 255, 0).
  const Bytes rgb{255, 0, 128, 0, 255, 0};
  // By hand: (1 - 0.485) / 0.229, (0 - 0.456) / 0.224, (128/255 - 0.406) / 0.225.
  const float r = 2.2489083f, g = -2.0357143f, b = 0.42649237f;
  const float r1 = -2.1179039f, g1 = 2.4285715f, b1 = -1.8044444f;
  float chw[6], hwc[6];
  normalize_image(rgb.data(), 2, 1, imagenet, TensorLayout::kChw, TensorType::kF32, chw);
  normalize_image(rgb.data(), 2, 1, imagenet, TensorLayout::kHwc, TensorType::kF32, hwc);
  const float expected_chw[6] = {r, r1, g, g1, b, b1};
  const float expected_hwc[6] = {r, g, b, r1, g1, b1};
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(chw[i], expected_chw[i], 1e-6) << i;
    EXPECT_NEAR(hwc[i], expected_hwc[i], 1e-6) << i;
  }
  uint16_t f16[6], bf16[6];
  normalize_image(rgb.data(), 2, 1, imagenet, TensorLayout::kChw, TensorType::kF16, f16);
  normalize_image(rgb.data(), 2, 1, imagenet, TensorLayout::kChw, TensorType::kBF16, bf16);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(f16[i], float_to_half(chw[i])) << i;
    EXPECT_EQ(bf16[i], float_to_bfloat16(chw[i])) << i;
    EXPECT_NEAR(half_to_float(f16[i]), expected_chw[i], 2e-3) << i;
  }
  EXPECT_THROW(normalize_image(rgb.data(), 2, 1, Normalization::mnist(), TensorLayout::kChw,
                               TensorType::kF32, chw),
               std::invalid_argument);
}

}  // namespace
}  // namespace sdp
