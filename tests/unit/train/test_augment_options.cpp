// data.augment -> what the loader does (train/training_setup.hpp): the shipped ResNet-20
// recipe relies on `flip` meaning flips without crops.
#include <gtest/gtest.h>

#include "train/training_setup.hpp"

namespace sdp {
namespace {

DataSpec data_of(Augmentation augment, DataFormat format) {
  DataSpec data;
  data.augment = augment;
  data.format = format;
  return data;
}

TEST(AugmentOptions, EveryChoiceMapsToTheLoader) {
  const AugmentOptions flip = augment_options(data_of(Augmentation::kFlip, DataFormat::kCifar10));
  EXPECT_TRUE(flip.enabled);
  EXPECT_TRUE(flip.flip);
  EXPECT_EQ(flip.pad, 0);  // no crop

  const AugmentOptions crop = augment_options(data_of(Augmentation::kCropFlip, DataFormat::kMnist));
  EXPECT_TRUE(crop.enabled);
  EXPECT_TRUE(crop.flip);
  EXPECT_EQ(crop.pad, 4);  // torchvision RandomCrop(32, padding=4)

  EXPECT_TRUE(augment_options(data_of(Augmentation::kAuto, DataFormat::kCifar10)).enabled);
  EXPECT_EQ(augment_options(data_of(Augmentation::kAuto, DataFormat::kCifar10)).pad, 4);
  EXPECT_FALSE(augment_options(data_of(Augmentation::kAuto, DataFormat::kMnist)).enabled);
  EXPECT_FALSE(augment_options(data_of(Augmentation::kNone, DataFormat::kCifar10)).enabled);
}

}  // namespace
}  // namespace sdp
