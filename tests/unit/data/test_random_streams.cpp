// The data side's random streams (data/loading/random.hpp): each keeps apart from the others by its
// own key, so two streams never draw the same numbers (a shared key once would make, say, the
// crop of sample i follow the shuffle's draw for it).
#include <gtest/gtest.h>

#include <set>

#include "data/loading/random.hpp"

namespace sdp {
namespace {

TEST(RandomStreams, EveryKeyDiffers) {
  const std::set<uint64_t> distinct(random_stream::kAll.begin(), random_stream::kAll.end());
  EXPECT_EQ(distinct.size(), random_stream::kAll.size());
}

TEST(RandomStreams, TheSameSampleDrawsApartInEachAugmentation) {
  // The two augmentations' generators for one (seed, epoch, sample) start apart.
  const uint64_t seed = 42;
  std::mt19937_64 crop_flip(mix_keys(seed ^ random_stream::kCropFlip, 3, 7));
  std::mt19937_64 transform(mix_keys(seed ^ random_stream::kImageTransform, 3, 7));
  EXPECT_NE(crop_flip(), transform());
}

}  // namespace
}  // namespace sdp
