// Forward results against naive reference loops and known values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "device_params.hpp"
#include "grad_check.hpp"
#include "nn/batchnorm2d.hpp"
#include "nn/conv2d.hpp"
#include "nn/linear.hpp"
#include "nn/pool2d.hpp"
#include "nn/softmax_cross_entropy.hpp"
#include "nn/threads.hpp"

namespace sdp::nn {
namespace {

using testing::LayerHarness;

// Every suite but Threads runs once per device (testing::test_devices()).
SDP_DEVICE_TEST_SUITE(Conv2dForward);
SDP_DEVICE_TEST_SUITE(Conv2dInit);
SDP_DEVICE_TEST_SUITE(LinearForward);
SDP_DEVICE_TEST_SUITE(BatchNorm2dForward);
SDP_DEVICE_TEST_SUITE(MaxPoolForward);
SDP_DEVICE_TEST_SUITE(AvgPoolForward);
SDP_DEVICE_TEST_SUITE(SoftmaxCrossEntropyForward);


TEST_P(Conv2dForward, MatchesNaiveLoop) {
  const int n = 2, c = 3, h = 7, w = 6, o = 4, k = 3, s = 2, p = 1;
  LayerHarness harness(GetParam());
  auto& conv = harness.make<Conv2d>(Conv2dOptions{c, o, k, s, p, true, false});
  harness.configure({n, c, h, w}, false);
  harness.input() = testing::random_vector(n * c * h * w, 30);
  const auto y = harness.forward();
  const int oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
  ASSERT_EQ(y.size(), static_cast<std::size_t>(n * o * oh * ow));
  const std::vector<float> wt = testing::host_values(conv.weight().value);
  const std::vector<float> b = testing::host_values(conv.bias()->value);
  const auto& x = harness.input();
  for (int i = 0; i < n; ++i)
    for (int oc = 0; oc < o; ++oc)
      for (int r = 0; r < oh; ++r)
        for (int q = 0; q < ow; ++q) {
          double acc = b[oc];
          for (int ic = 0; ic < c; ++ic)
            for (int kr = 0; kr < k; ++kr)
              for (int kq = 0; kq < k; ++kq) {
                const int yy = r * s - p + kr, xx = q * s - p + kq;
                if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                acc += static_cast<double>(wt[((oc * c + ic) * k + kr) * k + kq]) *
                       x[((i * c + ic) * h + yy) * w + xx];
              }
          EXPECT_NEAR(y[((i * o + oc) * oh + r) * ow + q], acc, 1e-5);
        }
}

TEST_P(Conv2dInit, KaimingNormalFanOut) {
  LayerHarness harness(GetParam());
  auto& conv = harness.make<Conv2d>(Conv2dOptions{64, 64, 3, 1, 1, false, false});
  const std::vector<float> wt = testing::host_values(conv.weight().value);
  double sum = 0, sq = 0;
  for (float v : wt) {
    sum += v;
    sq += v * v;
  }
  const double count = static_cast<double>(wt.size());
  const double mean = sum / count, stdev = std::sqrt(sq / count - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.005);
  EXPECT_NEAR(stdev, std::sqrt(2.0 / (64 * 9)), 0.003);
}

TEST_P(LinearForward, MatchesNaiveLoop) {
  LayerHarness harness(GetParam());
  auto& fc = harness.make<Linear>(LinearOptions{5, 3, true});
  harness.configure({2, 5}, false);
  harness.input() = testing::random_vector(10, 31);
  const auto y = harness.forward();
  const std::vector<float> wt = testing::host_values(fc.weight().value);
  const std::vector<float> b = testing::host_values(fc.bias()->value);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      double acc = b[j];
      for (int q = 0; q < 5; ++q)
        acc += static_cast<double>(wt[j * 5 + q]) * harness.input()[i * 5 + q];
      EXPECT_NEAR(y[i * 3 + j], acc, 1e-6);
    }
  // PyTorch's default bound 1/sqrt(fan_in).
  for (float v : wt) EXPECT_LE(std::abs(v), 1 / std::sqrt(5.f));
}

TEST_P(BatchNorm2dForward, InferenceUsesRunningStats) {
  LayerHarness harness(GetParam());
  auto& bn = harness.make<BatchNorm2d>(BatchNorm2dOptions{2, 1e-5f, 0.1f, false});
  const float rm[2] = {0.5f, -1.f}, rv[2] = {4.f, 0.25f};
  testing::set_values(bn.running_mean().value, {rm[0], rm[1]});
  testing::set_values(bn.running_var().value, {rv[0], rv[1]});
  testing::set_value(bn.weight().value, 1, 2.f);
  testing::set_value(bn.bias().value, 0, 0.3f);
  harness.configure({3, 2, 2, 2}, false);
  harness.input() = testing::random_vector(24, 32);
  const auto y = harness.forward();
  const float gamma[2] = {1.f, 2.f}, beta[2] = {0.3f, 0.f};
  for (int i = 0; i < 24; ++i) {
    const int c = (i / 4) % 2;
    const float ref = (harness.input()[i] - rm[c]) / std::sqrt(rv[c] + 1e-5f) * gamma[c] + beta[c];
    EXPECT_NEAR(y[i], ref, 1e-5);
  }
}

TEST_P(BatchNorm2dForward, TrainingNormalizesAndUpdatesRunningStats) {
  LayerHarness harness(GetParam());
  auto& bn = harness.make<BatchNorm2d>(BatchNorm2dOptions{2, 1e-5f, 0.1f, false});
  harness.configure({2, 2, 1, 3}, true);
  harness.input() = {1, 2, 3, 10, 20, 30, 4, 5, 6, -1, -2, -3};
  const auto y = harness.forward();
  // Channel 0 holds {1,2,3,4,5,6}: mean 3.5, biased var 35/12, unbiased 7/2.
  const double mean0 = 3.5, var0 = 35.0 / 12;
  EXPECT_NEAR(y[0], (1 - mean0) / std::sqrt(var0 + 1e-5), 1e-5);
  const std::vector<float> running_mean = testing::host_values(bn.running_mean().value);
  const std::vector<float> running_var = testing::host_values(bn.running_var().value);
  EXPECT_NEAR(running_mean[0], 0.1 * mean0, 1e-6);
  EXPECT_NEAR(running_var[0], 0.9 + 0.1 * 3.5, 1e-6);
  // Channel 1 holds {10,20,30,-1,-2,-3}: mean 9.
  EXPECT_NEAR(running_mean[1], 0.9, 1e-5);
}

TEST_P(MaxPoolForward, PicksWindowMaximum) {
  LayerHarness harness(GetParam());
  harness.make<Pool2d>(max_pool(2, 2));
  harness.configure({1, 1, 4, 4}, false);
  harness.input() = {1, 5, 2, 0, 3, 4, 8, 1, 0, 0, 1, 1, -1, 9, 1, 2};
  EXPECT_EQ(harness.forward(), (std::vector<float>{5, 8, 9, 2}));
}

// Naive max pooling (stride == kernel, no padding, floor mode) over a plain NCHW input,
// optionally followed by ReLU.
std::vector<float> naive_max_pool(const std::vector<float>& x, int n, int c, int h, int w, int k,
                                  bool relu) {
  const int oh = h / k, ow = w / k;
  std::vector<float> y(static_cast<std::size_t>(n) * c * oh * ow);
  for (int in = 0; in < n; ++in)
    for (int ic = 0; ic < c; ++ic)
      for (int i = 0; i < oh; ++i)
        for (int j = 0; j < ow; ++j) {
          float m = -INFINITY;
          for (int a = 0; a < k; ++a)
            for (int b = 0; b < k; ++b)
              m = std::max(m, x[((in * c + ic) * h + i * k + a) * w + j * k + b]);
          y[((in * c + ic) * oh + i) * ow + j] = relu ? std::max(m, 0.f) : m;
        }
  return y;
}

TEST_P(MaxPoolForward, MatchesNaiveLoopWithAndWithoutRelu) {
  // k 3 on 9x10 leaves a column unpooled.
  struct Case {
    memory::format_tag layout;
    int k;
    bool relu;
  };
  const int n = 2, c = 6, h = 9, w = 10;
  for (const Case& t :
       {Case{memory::format_tag::abcd, 2, false}, Case{memory::format_tag::abcd, 3, true},
        Case{memory::format_tag::acdb, 2, true}, Case{memory::format_tag::acdb, 3, false},
        Case{memory::format_tag::nChw16c, 2, true}, Case{memory::format_tag::nChw8c, 3, false}}) {
    for (bool training : {false, true}) {
      LayerHarness harness(GetParam());
      harness.make<Pool2d>(max_pool(t.k, t.k, 0, t.relu));
      harness.configure({n, c, h, w}, training, t.layout);
      harness.input() = testing::random_vector(n * c * h * w, 21 + t.k);
      EXPECT_EQ(harness.forward(), naive_max_pool(harness.input(), n, c, h, w, t.k, t.relu))
          << "layout " << static_cast<int>(t.layout) << " k " << t.k << " relu " << t.relu;
    }
  }
}

TEST_P(MaxPoolForward, EveryLayoutChannelCountAndOutputLayout) {
  // The hand-written path: vectorized (kernel 2 over a 16-channel block or full 16-channel
  // NHWC runs, including a second, partial block) and one channel at a time (the rest);
  // output in the input's layout or NHWC.
  for (int c : {6, 16, 20})
    for (memory::format_tag layout : {memory::format_tag::nChw16c, memory::format_tag::acdb,
                                      memory::format_tag::abcd, memory::format_tag::nChw8c})
      for (int k : {2, 3})
        for (bool relu : {false, true})
          for (bool channels_last : {false, true}) {
            const int n = 2, h = 7, w = 9;
            LayerHarness harness(GetParam());
            harness.make<Pool2d>(max_pool(k, k, 0, relu, channels_last));
            harness.configure({n, c, h, w}, true, layout);
            harness.input() = testing::random_vector(n * c * h * w, 40 + c + k);
            const std::string what = "c " + std::to_string(c) + " layout " +
                                     std::to_string(static_cast<int>(layout)) + " k " +
                                     std::to_string(k) + " relu " + std::to_string(relu) +
                                     " channels_last " + std::to_string(channels_last);
            EXPECT_EQ(harness.forward(), naive_max_pool(harness.input(), n, c, h, w, k, relu))
                << what;
            if (channels_last) {
              EXPECT_EQ(harness.layer_dst_desc().layout, Layout::kChannelsLast) << what;
            }
          }
}

TEST_P(MaxPoolForward, NanInAWindowPropagates) {
  // PyTorch's max pool returns NaN for a window holding one; so must both paths (a NaN
  // after a larger number, and a NaN first), with and without the fused ReLU.
  for (memory::format_tag layout : {memory::format_tag::nChw16c, memory::format_tag::abcd})
    for (bool relu : {false, true}) {
      LayerHarness harness(GetParam());
      harness.make<Pool2d>(max_pool(2, 2, 0, relu));
      harness.configure({1, 1, 2, 4}, false, layout);
      harness.input() = {5.f, NAN, NAN, -1.f, 1.f, 2.f, 3.f, 4.f};
      const std::vector<float> y = harness.forward();
      ASSERT_EQ(y.size(), 2u);
      EXPECT_TRUE(std::isnan(y[0])) << "relu " << relu;
      EXPECT_TRUE(std::isnan(y[1])) << "relu " << relu;
    }
}

TEST_P(AvgPoolForward, AveragesWindows) {
  LayerHarness harness(GetParam());
  harness.make<Pool2d>(global_avg_pool());
  harness.configure({1, 2, 2, 2}, false);
  harness.input() = {1, 2, 3, 4, 10, 10, 10, 50};
  EXPECT_EQ(harness.forward(), (std::vector<float>{2.5f, 20.f}));
}

TEST_P(SoftmaxCrossEntropyForward, KnownLogits) {
  testing::LayerHarness h(GetParam());
  std::unique_ptr<SoftmaxCrossEntropy> ce = SoftmaxCrossEntropy::create(h.ctx());
  const TensorRef zm = h.device_buffer(TensorDesc::plain({2, 3}, GetParam()));
  ce->configure(zm.desc, 3);
  h.from_host({1, 2, 3, 1, 1, 1}, zm);
  const int32_t labels[2] = {2, 1};
  int64_t correct = -1;
  const float loss = ce->forward(zm, labels, &correct);
  // -log softmax: row 0 -> log(e^-2 + e^-1 + 1), row 1 -> log 3.
  const double ref = (std::log(std::exp(-2.0) + std::exp(-1.0) + 1.0) + std::log(3.0)) / 2;
  EXPECT_NEAR(loss, ref, 1e-6);
  EXPECT_EQ(correct, 1);  // row 0 hits; row 1 ties resolve to class 0 like torch.argmax
  uint8_t hits[2] = {9, 9};  // per row, for per-class accuracy
  EXPECT_FLOAT_EQ(ce->forward(zm, labels, nullptr, hits), loss);
  EXPECT_EQ(hits[0], 1);
  EXPECT_EQ(hits[1], 0);
  const std::vector<float> g = h.to_host(ce->backward());
  EXPECT_NEAR(g[2], (std::exp(0.0) / (std::exp(-2.0) + std::exp(-1.0) + 1.0) - 1) / 2, 1e-6);
  EXPECT_NEAR(g[3], 1.0 / 6, 1e-6);
}

// Label smoothing e = 0.3 over K = 3: target q = (0.1, 0.1, 0.8) for label 2, loss
// -sum q_j log p_j, gradient (p - q) / N.
TEST_P(SoftmaxCrossEntropyForward, LabelSmoothingTargets) {
  testing::LayerHarness h(GetParam());
  std::unique_ptr<SoftmaxCrossEntropy> ce = SoftmaxCrossEntropy::create(h.ctx());
  ce->set_label_smoothing(0.3f);
  const TensorRef zm = h.device_buffer(TensorDesc::plain({2, 3}, GetParam()));
  ce->configure(zm.desc, 3);
  h.from_host({1, 2, 3, 1, 1, 1}, zm);
  const int32_t labels[2] = {2, 1};
  int64_t correct = -1;
  const float loss = ce->forward(zm, labels, &correct);
  const double lse0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  const double row0 = -(0.1 * (1 - lse0) + 0.1 * (2 - lse0) + 0.8 * (3 - lse0));
  const double row1 = std::log(3.0);  // uniform p: every target gives log K
  EXPECT_NEAR(loss, (row0 + row1) / 2, 1e-6);
  EXPECT_EQ(correct, 1);
  const std::vector<float> g = h.to_host(ce->backward());
  const double p02 = std::exp(3.0 - lse0), p00 = std::exp(1.0 - lse0);
  EXPECT_NEAR(g[2], (p02 - 0.8) / 2, 1e-6);
  EXPECT_NEAR(g[0], (p00 - 0.1) / 2, 1e-6);
  EXPECT_NEAR(g[3], (1.0 / 3 - 0.1) / 2, 1e-6);
  EXPECT_NEAR(g[4], (1.0 / 3 - 0.8) / 2, 1e-6);
}

TEST_P(SoftmaxCrossEntropyForward, RejectsBadLabel) {
  testing::LayerHarness h(GetParam());
  std::unique_ptr<SoftmaxCrossEntropy> ce = SoftmaxCrossEntropy::create(h.ctx());
  const TensorRef zm = h.device_buffer(TensorDesc::plain({1, 3}, GetParam()));
  ce->configure(zm.desc, 3);
  h.from_host({1, 2, 3}, zm);
  const int32_t labels[1] = {3};
  EXPECT_THROW(ce->forward(zm, labels, nullptr), InputError);
}

TEST(Threads, SetNumThreads) {
  const int before = num_threads();
  set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
  set_num_threads(before);
  EXPECT_THROW(set_num_threads(0), std::invalid_argument);
}

}  // namespace
}  // namespace sdp::nn
