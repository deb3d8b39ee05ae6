#include <gtest/gtest.h>

#include <vector>

#include "core/error.hpp"
#include "data/sets/synthetic.hpp"

namespace sdp {
namespace {

TEST(Synthetic, SeededAndShaped) {
  SyntheticSpec spec;
  spec.count = 300;
  spec.channels = 3;
  spec.height = 8;
  spec.width = 6;
  spec.num_classes = 4;
  Dataset a = make_synthetic(spec, Split::kTrain), b = make_synthetic(spec, Split::kTrain);
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.images.size(), 300u * 3 * 8 * 6);
  EXPECT_EQ(a.num_classes, 4);
  for (int64_t h : a.label_histogram()) EXPECT_GT(h, 40);
  Dataset test = make_synthetic(spec, Split::kTest);
  EXPECT_NE(test.images, a.images);
  // Same normalization for both splits (derived from the shared templates).
  EXPECT_EQ(test.normalization.mean, a.normalization.mean);
  EXPECT_EQ(test.normalization.std, a.normalization.std);
  spec.seed = 43;
  EXPECT_NE(make_synthetic(spec, Split::kTrain).images, a.images);
  spec.num_classes = 1;
  EXPECT_THROW(make_synthetic(spec, Split::kTrain), InputError);
}

TEST(Synthetic, LearnableByNearestCentroid) {
  // Class means from the train split classify the test split: a proxy for "a small
  // MLP gets > 90 %" that needs no model code here.
  SyntheticSpec spec;
  spec.count = 2000;
  Dataset train = make_synthetic(spec, Split::kTrain);
  spec.count = 1000;
  Dataset test = make_synthetic(spec, Split::kTest);
  const int64_t d = train.sample_bytes();
  std::vector<double> centroid(10 * d, 0.0);
  auto hist = train.label_histogram();
  for (int64_t i = 0; i < train.count; ++i)
    for (int64_t k = 0; k < d; ++k) centroid[train.labels[i] * d + k] += train.image(i)[k];
  for (int c = 0; c < 10; ++c)
    for (int64_t k = 0; k < d; ++k) centroid[c * d + k] /= hist[c];
  int correct = 0;
  for (int64_t i = 0; i < test.count; ++i) {
    int best = 0;
    double best_dist = 1e300;
    for (int c = 0; c < 10; ++c) {
      double dist = 0;
      for (int64_t k = 0; k < d; ++k) {
        double diff = test.image(i)[k] - centroid[c * d + k];
        dist += diff * diff;
      }
      if (dist < best_dist) best_dist = dist, best = c;
    }
    correct += best == test.labels[i];
  }
  EXPECT_GT(correct / double(test.count), 0.9);
  // Not trivial either: two samples of one class differ (the noise is real).
  int64_t j = 1;
  while (train.labels[j] != train.labels[0]) ++j;
  EXPECT_NE(std::vector<uint8_t>(train.image(0), train.image(0) + d),
            std::vector<uint8_t>(train.image(j), train.image(j) + d));
}

}  // namespace
}  // namespace sdp
