#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "data/images/augment.hpp"
#include "data/loading/batch_assembler.hpp"

namespace sdp {
namespace {

TEST(CropFlip, DrawIsDeterministicAndCoversTheRange) {
  AugmentOptions opt;
  opt.seed = 17;
  std::set<int> dys, dxs;
  int flips = 0;
  for (int64_t i = 0; i < 2000; ++i) {
    CropFlip a = draw_crop_flip(opt, 3, i), b = draw_crop_flip(opt, 3, i);
    EXPECT_EQ(a.dy, b.dy);
    EXPECT_EQ(a.dx, b.dx);
    EXPECT_EQ(a.flip, b.flip);
    ASSERT_GE(a.dy, 0);
    ASSERT_LE(a.dy, 8);
    ASSERT_GE(a.dx, 0);
    ASSERT_LE(a.dx, 8);
    dys.insert(a.dy);
    dxs.insert(a.dx);
    flips += a.flip;
  }
  EXPECT_EQ(dys.size(), 9u);
  EXPECT_EQ(dxs.size(), 9u);
  EXPECT_NEAR(flips / 2000.0, 0.5, 0.05);
  // A different epoch redraws.
  int same = 0;
  for (int64_t i = 0; i < 100; ++i) {
    CropFlip a = draw_crop_flip(opt, 3, i), b = draw_crop_flip(opt, 4, i);
    same += a.dy == b.dy && a.dx == b.dx && a.flip == b.flip;
  }
  EXPECT_LT(same, 20);
  opt.flip = false;
  for (int64_t i = 0; i < 100; ++i) EXPECT_FALSE(draw_crop_flip(opt, 0, i).flip);
}

// 1 channel 3x3 image 1..9, padding 1.
const uint8_t kImg[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

std::vector<uint8_t> crop(int dy, int dx, bool flip) {
  std::vector<uint8_t> out(9);
  apply_crop_flip(kImg, out.data(), 1, 3, 3, 1, CropFlip{dy, dx, flip});
  return out;
}

TEST(CropFlip, TinyImage) {
  // Centre crop of the padded image is the image.
  EXPECT_EQ(crop(1, 1, false), (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // Top-left crop: shifted down-right, zero padding enters at the top and left.
  EXPECT_EQ(crop(0, 0, false), (std::vector<uint8_t>{0, 0, 0, 0, 1, 2, 0, 4, 5}));
  // Bottom-right crop.
  EXPECT_EQ(crop(2, 2, false), (std::vector<uint8_t>{5, 6, 0, 8, 9, 0, 0, 0, 0}));
  // Flip alone mirrors each row.
  EXPECT_EQ(crop(1, 1, true), (std::vector<uint8_t>{3, 2, 1, 6, 5, 4, 9, 8, 7}));
  // Crop then flip (torchvision order): crop (0, 0) = [0 0 0; 0 1 2; 0 4 5], mirrored.
  EXPECT_EQ(crop(0, 0, true), (std::vector<uint8_t>{0, 0, 0, 2, 1, 0, 5, 4, 0}));
}

Dataset tiny_dataset() {
  Dataset ds;
  ds.name = "tiny";
  ds.count = 4;
  ds.channels = 2;
  ds.height = 5;
  ds.width = 6;
  ds.num_classes = 3;
  for (int i = 0; i < 4 * 60; ++i) ds.images.push_back(static_cast<uint8_t>(i * 37 % 256));
  ds.labels = {2, 0, 1, 2};
  ds.normalization = {{0.25f, 0.5f}, {0.5f, 0.2f}};
  return ds;
}

TEST(BatchAssembler, NormalizesLikeTorchvision) {
  Dataset ds = tiny_dataset();
  BatchAssembler assembler(ds);
  Batch batch;
  assembler.assemble({3, 1}, 0, batch);
  ASSERT_EQ(batch.images.shape(), (Shape{2, 2, 5, 6}));
  EXPECT_EQ(batch.labels, (std::vector<int32_t>{2, 0}));
  const float* x = batch.images.data<float>();
  for (int b = 0; b < 2; ++b)
    for (int c = 0; c < 2; ++c)
      for (int p = 0; p < 30; ++p) {
        uint8_t v = ds.image(b == 0 ? 3 : 1)[c * 30 + p];
        float expected = (v / 255.0f - ds.normalization.mean[c]) / ds.normalization.std[c];
        ASSERT_EQ(x[(b * 2 + c) * 30 + p], expected);
      }
}

TEST(BatchAssembler, AugmentedEqualsCropFlipThenNormalize) {
  Dataset ds = tiny_dataset();
  AugmentOptions aug;
  aug.enabled = true;
  aug.pad = 2;
  aug.seed = 5;
  BatchAssembler assembler(ds, aug);
  Batch batch;
  assembler.assemble({0, 1, 2, 3}, 7, batch);
  for (int b = 0; b < 4; ++b) {
    std::vector<uint8_t> ref(60);
    apply_crop_flip(ds.image(b), ref.data(), 2, 5, 6, 2, draw_crop_flip(aug, 7, b));
    for (int k = 0; k < 60; ++k) {
      int c = k / 30;
      float expected = (ref[k] / 255.0f - ds.normalization.mean[c]) / ds.normalization.std[c];
      ASSERT_EQ(batch.images.data<float>()[b * 60 + k], expected) << "sample " << b << " k " << k;
    }
  }
}

// data.augment: flip is pad 0: every sample is either the image or its mirror, never shifted.
TEST(BatchAssembler, FlipOnlyMirrorsWithoutShifting) {
  Dataset ds = tiny_dataset();
  AugmentOptions aug;
  aug.enabled = true;
  aug.pad = 0;
  aug.seed = 5;
  BatchAssembler assembler(ds, aug);
  Batch batch;
  int flipped = 0;
  for (int64_t epoch = 0; epoch < 8; ++epoch) {
    assembler.assemble({0, 1, 2, 3}, epoch, batch);
    for (int b = 0; b < 4; ++b) {
      const bool flip = draw_crop_flip(aug, epoch, b).flip;
      flipped += flip;
      for (int k = 0; k < 60; ++k) {
        const int c = k / 30, y = (k % 30) / 6, x = k % 6;
        const uint8_t v = ds.image(b)[c * 30 + y * 6 + (flip ? 5 - x : x)];
        const float expected = (v / 255.0f - ds.normalization.mean[c]) / ds.normalization.std[c];
        ASSERT_EQ(batch.images.data<float>()[b * 60 + k], expected) << "epoch " << epoch << " sample " << b;
      }
    }
  }
  EXPECT_GT(flipped, 4);   // of 32 draws, about half mirror
  EXPECT_LT(flipped, 28);
}

TEST(BatchAssembler, ReusesStorageAndShrinksTheView) {
  Dataset ds = tiny_dataset();
  BatchAssembler assembler(ds);
  Batch batch;
  assembler.assemble({0, 1, 2}, 0, batch);
  const void* storage = batch.storage.raw();
  assembler.assemble({3}, 0, batch);
  EXPECT_EQ(batch.storage.raw(), storage);
  EXPECT_EQ(batch.images.shape(), (Shape{1, 2, 5, 6}));
  EXPECT_EQ(batch.size(), 1);
}

}  // namespace
}  // namespace sdp
