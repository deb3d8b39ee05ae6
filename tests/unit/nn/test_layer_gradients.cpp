// Finite-difference checks of every layer's input and parameter gradients, with
// L = sum(w * y) for a fixed random w, for every layer built by its factory on every device
// this build and machine have (tests/unit/nn/device_params.hpp).
#include <gtest/gtest.h>

#include "device_params.hpp"
#include "grad_check.hpp"
#include "nn/add.hpp"
#include "nn/batchnorm2d.hpp"
#include "nn/conv2d.hpp"
#include "nn/dropout.hpp"
#include "nn/flatten.hpp"
#include "nn/linear.hpp"
#include "nn/pad_shortcut.hpp"
#include "nn/pool2d.hpp"
#include "nn/relu.hpp"
#include "nn/residual_block.hpp"
#include "nn/softmax_cross_entropy.hpp"

namespace sdp::nn {
namespace {

using testing::GradCheckOptions;
using testing::LayerHarness;
using tag = memory::format_tag;

// Inputs spread with gaps of `gap` in random order: no ties and no kink (ReLU at 0,
// max-pool switch) within reach of the finite-difference step.
std::vector<float> spread_values(int64_t n, float gap, uint64_t seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = (static_cast<float>(i) - n / 2.0f + 0.5f) * gap;
  std::mt19937_64 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

void fill_random(std::vector<float>& x, uint64_t seed) {
  x = testing::random_vector(x.size(), seed);
}

// Every suite runs once per device (testing::test_devices()).
SDP_DEVICE_TEST_SUITE(Conv2dGrad);
SDP_DEVICE_TEST_SUITE(BatchNorm2dGrad);
SDP_DEVICE_TEST_SUITE(ReluGrad);
SDP_DEVICE_TEST_SUITE(MaxPoolGrad);
SDP_DEVICE_TEST_SUITE(AvgPoolGrad);
SDP_DEVICE_TEST_SUITE(GlobalAvgPoolGrad);
SDP_DEVICE_TEST_SUITE(LinearGrad);
SDP_DEVICE_TEST_SUITE(DropoutGrad);
SDP_DEVICE_TEST_SUITE(FlattenGrad);
SDP_DEVICE_TEST_SUITE(PadShortcutGrad);
SDP_DEVICE_TEST_SUITE(AddGrad);
SDP_DEVICE_TEST_SUITE(SoftmaxCrossEntropyGrad);
SDP_DEVICE_TEST_SUITE(ResidualBlockGrad);

TEST_P(Conv2dGrad, Stride2Padding1WithBias) {
  LayerHarness h(GetParam());
  h.make<Conv2d>(Conv2dOptions{3, 4, 3, 2, 1, /*bias=*/true, false});
  h.configure({2, 3, 7, 7}, true);
  fill_random(h.input(), 1);
  EXPECT_EQ(h.out_dims(), (Dims{2, 4, 4, 4}));
  h.check_all({});
}

TEST_P(Conv2dGrad, NoBiasStride1Padding0) {
  LayerHarness h(GetParam());
  h.make<Conv2d>(Conv2dOptions{2, 3, 3, 1, 0, false, false});
  h.configure({2, 2, 5, 6}, true);
  fill_random(h.input(), 2);
  ASSERT_EQ(h.store().params().size(), 1u);
  h.check_all({});
}

TEST_P(Conv2dGrad, OneInputChannel) {
  // A first layer on grayscale images (LeNet-5's conv1: the CPU computes its weight gradient
  // with nn/direct_conv_grad.hpp); 10 output channels span two blocks of 8. The fused ReLU's
  // case is in FusedReluMatchesConvThenRelu.
  LayerHarness h(GetParam());
  h.make<Conv2d>(Conv2dOptions{1, 10, 5, 1, 2, /*bias=*/true, false});
  h.configure({3, 1, 9, 8}, true);
  fill_random(h.input(), 4);
  h.check_all({});
}

TEST_P(Conv2dGrad, BlockedLayoutInput) {
  // The layout models pass between layers on AVX-512 machines.
  LayerHarness h(GetParam());
  h.make<Conv2d>(Conv2dOptions{16, 16, 3, 2, 1, false, false});
  h.configure({2, 16, 6, 6}, true, tag::nChw16c);
  fill_random(h.input(), 3);
  h.check_all({});
}

TEST_P(Conv2dGrad, FusedReluMatchesConvThenRelu) {
  // Same seed -> same weights; the fused layer must equal conv followed by ReLU exactly,
  // forward and backward (the ReLU itself is checked with finite differences below); with 3
  // input channels and with one (the CPU's direct weight gradient).
  for (int in_channels : {3, 1}) {
    LayerHarness fused(GetParam()), plain(GetParam());
    fused.make<Conv2d>(Conv2dOptions{in_channels, 5, 3, 1, 1, true, true});
    plain.make<Conv2d>(Conv2dOptions{in_channels, 5, 3, 1, 1, true, false});
    fused.configure({2, in_channels, 5, 5}, true);
    plain.configure({2, in_channels, 5, 5}, true);
    fill_random(fused.input(), 4);
    plain.input() = fused.input();
    const auto y_fused = fused.forward();
    auto y = plain.forward();
    std::vector<float> relu_mask(y.size());
    for (std::size_t i = 0; i < y.size(); ++i) {
      relu_mask[i] = y[i] > 0 ? 1.f : 0.f;
      y[i] = std::max(y[i], 0.f);
      EXPECT_NEAR(y_fused[i], y[i], 1e-6);
    }
    for (std::size_t i = 0; i < y.size(); ++i)
      plain.loss_weights()[i] = fused.loss_weights()[i] * relu_mask[i];
    const auto dx_fused = fused.backward();
    const auto dx = plain.backward();
    for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx_fused[i], dx[i], 1e-5);
    for (std::size_t p = 0; p < 2; ++p) {
      const std::vector<float> a = testing::host_values(fused.store().params()[p].grad);
      const std::vector<float> b = testing::host_values(plain.store().params()[p].grad);
      for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5);
    }
  }
}

TEST_P(Conv2dGrad, ChannelsLast) {
  // NHWC activations (LeNet-5's conv2), handed in as NHWC, NCHW and nChw16c.
  for (memory::format_tag layout : {tag::acdb, tag::abcd, tag::nChw16c}) {
    LayerHarness h(GetParam());
    h.make<Conv2d>(Conv2dOptions{6, 5, 3, 1, 1, /*bias=*/true, false, /*channels_last=*/true});
    h.configure({2, 6, 5, 5}, true, layout);
    fill_random(h.input(), 19);
    h.check_all({});
  }
}

TEST_P(Conv2dGrad, ChannelsLastMatchesDefaultLayout) {
  LayerHarness cl(GetParam()), ref(GetParam());
  cl.make<Conv2d>(Conv2dOptions{6, 16, 5, 1, 0, true, false, /*channels_last=*/true});
  ref.make<Conv2d>(Conv2dOptions{6, 16, 5, 1, 0, true, false, false});
  cl.configure({3, 6, 9, 9}, true);
  ref.configure({3, 6, 9, 9}, true);
  fill_random(cl.input(), 20);
  ref.input() = cl.input();
  const auto y_cl = cl.forward(), y = ref.forward();
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y_cl[i], y[i], 1e-5);
  const auto dx_cl = cl.backward(), dx = ref.backward();
  for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx_cl[i], dx[i], 1e-5);
  for (std::size_t p = 0; p < 2; ++p) {
    const std::vector<float> a = testing::host_values(cl.store().params()[p].grad);
    const std::vector<float> b = testing::host_values(ref.store().params()[p].grad);
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4);
  }
}

TEST_P(BatchNorm2dGrad, TrainingMode) {
  LayerHarness h(GetParam());
  auto& bn = h.make<BatchNorm2d>(BatchNorm2dOptions{3, 1e-5f, 0.1f, false});
  h.configure({2, 3, 3, 4}, true);
  fill_random(h.input(), 5);
  // Non-trivial gamma/beta so terms scaled by them are visible.
  testing::set_values(bn.weight().value, {0.5f, 0.8f, 1.1f});
  testing::set_values(bn.bias().value, {-0.2f, -0.1f, 0.0f});
  h.check_all({});
}

TEST_P(BatchNorm2dGrad, TrainingModeBlockedLayout) {
  LayerHarness h(GetParam());
  h.make<BatchNorm2d>(BatchNorm2dOptions{16, 1e-5f, 0.1f, false});
  h.configure({2, 16, 2, 3}, true, tag::nChw16c);
  fill_random(h.input(), 6);
  h.check_all({});
}

TEST_P(BatchNorm2dGrad, FusedReluMatchesBnThenRelu) {
  LayerHarness fused(GetParam()), plain(GetParam());
  fused.make<BatchNorm2d>(BatchNorm2dOptions{4, 1e-5f, 0.1f, true});
  plain.make<BatchNorm2d>(BatchNorm2dOptions{4, 1e-5f, 0.1f, false});
  fused.configure({3, 4, 3, 3}, true);
  plain.configure({3, 4, 3, 3}, true);
  fill_random(fused.input(), 7);
  plain.input() = fused.input();
  const auto y_fused = fused.forward();
  auto y = plain.forward();
  std::vector<float>& w = plain.loss_weights();
  for (std::size_t i = 0; i < y.size(); ++i) {
    EXPECT_NEAR(y_fused[i], std::max(y[i], 0.f), 1e-5);
    w[i] = y[i] > 0 ? fused.loss_weights()[i] : 0.f;
  }
  const auto dx_fused = fused.backward();
  const auto dx = plain.backward();
  for (std::size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx_fused[i], dx[i], 1e-4);
  for (std::size_t p = 0; p < 2; ++p) {
    const std::vector<float> a = testing::host_values(fused.store().params()[p].grad);
    const std::vector<float> b = testing::host_values(plain.store().params()[p].grad);
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4);
  }
}

TEST_P(ReluGrad, AwayFromZero) {
  LayerHarness h(GetParam());
  h.make<ReLU>();
  h.configure({2, 3, 4, 5}, true);
  h.input() = spread_values(120, 0.05f, 8);
  h.check_all({});
}

TEST_P(ReluGrad, BlockedLayout) {
  LayerHarness h(GetParam());
  h.make<ReLU>();
  h.configure({2, 6, 3, 3}, true, tag::nChw8c);
  h.input() = spread_values(108, 0.05f, 9);
  h.check_all({});
}

TEST_P(MaxPoolGrad, Kernel2Stride2) {
  LayerHarness h(GetParam());
  h.make<Pool2d>(max_pool(2, 2));
  h.configure({2, 3, 6, 6}, true);
  h.input() = spread_values(216, 0.05f, 10);
  EXPECT_EQ(h.out_dims(), (Dims{2, 3, 3, 3}));
  h.check_all({});
}

TEST_P(MaxPoolGrad, Kernel3Stride2Padding1OddInput) {
  LayerHarness h(GetParam());
  h.make<Pool2d>(max_pool(3, 2, 1));
  h.configure({1, 2, 7, 7}, true);
  h.input() = spread_values(98, 0.05f, 11);
  EXPECT_EQ(h.out_dims(), (Dims{1, 2, 4, 4}));
  h.check_all({});
}

TEST_P(MaxPoolGrad, FusedReluKernel2Stride2) {
  // LeNet's pool+ReLU: blocked (what the convolutions produce) and plain NHWC / NCHW; about
  // half the windows are clamped by the ReLU.
  for (memory::format_tag layout : {tag::nChw16c, tag::nChw8c, tag::acdb, tag::abcd}) {
    LayerHarness h(GetParam());
    h.make<Pool2d>(max_pool(2, 2, 0, /*fuse_relu=*/true));
    h.configure({2, 6, 7, 9}, true, layout);
    EXPECT_EQ(h.out_dims(), (Dims{2, 6, 3, 4}));
    h.input() = spread_values(756, 0.05f, 15);
    h.check_all({});
  }
}

TEST_P(MaxPoolGrad, VectorizedPathsAndNhwcOutput) {
  // Kernel 2 over 20 channels (a full and a padded 16-channel block, blocks of 8 as oneDNN
  // lays them out on AVX2, or NHWC runs of 16 and 4), with and without the ReLU, output in the
  // input's layout or NHWC (LeNet's pool1).
  for (memory::format_tag layout : {tag::nChw16c, tag::nChw8c, tag::acdb})
    for (bool relu : {false, true})
      for (bool channels_last : {false, true}) {
        LayerHarness h(GetParam());
        h.make<Pool2d>(max_pool(2, 2, 0, relu, channels_last));
        h.configure({2, 20, 5, 4}, true, layout);
        h.input() = spread_values(800, 0.05f, 16);
        h.check_all({});
      }
}

TEST_P(MaxPoolGrad, TiesRouteTheGradientToTheFirstMaximumOnly) {
  // A constant input ties every window: the whole gradient goes to its top-left element
  // (PyTorch and oneDNN), none to the others, and the unpooled last row gets none.
  for (memory::format_tag layout : {tag::nChw16c, tag::acdb, tag::abcd}) {
    LayerHarness h(GetParam());
    h.make<Pool2d>(max_pool(2, 2, 0, /*fuse_relu=*/true));
    h.configure({1, 3, 5, 4}, true, layout);
    h.input().assign(60, 1.f);
    h.loss_weights().assign(12, 2.f);
    h.forward();
    const std::vector<float> dx = h.backward();
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 5; ++y)
        for (int x = 0; x < 4; ++x) {
          const bool first = y < 4 && y % 2 == 0 && x % 2 == 0;
          EXPECT_EQ(dx[(c * 5 + y) * 4 + x], first ? 2.f : 0.f)
              << "layout " << static_cast<int>(layout) << " c " << c << " y " << y << " x " << x;
        }
  }
}

TEST_P(MaxPoolGrad, FusedReluOverlappingWindows) {
  for (memory::format_tag layout : {tag::abcd, tag::nChw16c}) {
    LayerHarness h(GetParam());
    h.make<Pool2d>(max_pool(3, 2, 1, /*fuse_relu=*/true));
    h.configure({2, 3, 7, 7}, true, layout);
    h.input() = spread_values(294, 0.05f, 18);
    h.check_all({});
  }
}

TEST_P(AvgPoolGrad, Kernel2Stride2) {
  LayerHarness h(GetParam());
  h.make<Pool2d>(avg_pool(2, 2));
  h.configure({2, 3, 4, 6}, true);
  fill_random(h.input(), 12);
  h.check_all({});
}

TEST_P(GlobalAvgPoolGrad, AnySpatialSize) {
  LayerHarness h(GetParam());
  h.make<Pool2d>(global_avg_pool());
  h.configure({2, 16, 3, 5}, true, tag::nChw16c);
  fill_random(h.input(), 13);
  EXPECT_EQ(h.out_dims(), (Dims{2, 16, 1, 1}));
  h.check_all({});
}

TEST_P(LinearGrad, WithBias) {
  LayerHarness h(GetParam());
  h.make<Linear>(LinearOptions{7, 5, true});
  h.configure({3, 7}, true);
  fill_random(h.input(), 14);
  h.check_all({});
}

TEST_P(LinearGrad, WithoutBias) {
  LayerHarness h(GetParam());
  h.make<Linear>(LinearOptions{6, 4, false});
  h.configure({2, 6}, true);
  fill_random(h.input(), 15);
  h.check_all({});
}

TEST_P(DropoutGrad, FixedMask) {
  LayerHarness h(GetParam());
  auto& drop = h.make<Dropout>(0.5f);
  drop.set_fixed_mask(true);
  h.configure({4, 3, 2, 5}, true);
  fill_random(h.input(), 16);
  const auto y = h.forward();
  int zeros = 0, scaled = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (y[i] == 0.f)
      ++zeros;
    else if (std::abs(y[i] - 2.f * h.input()[i]) < 1e-6f)
      ++scaled;
  }
  EXPECT_EQ(zeros + scaled, static_cast<int>(y.size()));  // inverted scaling 1/(1-p)
  EXPECT_GT(zeros, 20);
  EXPECT_GT(scaled, 20);
  h.check_all({});
}

// Masks are a function of the random position (stream = rank, step): a new step or another
// rank draws a new mask, and returning to a position draws its mask again (what a resumed
// run relies on); two forwards within one step continue the stream (accumulation).
TEST_P(DropoutGrad, MaskFollowsTheRandomPosition) {
  LayerHarness h(GetParam());
  h.make<Dropout>(0.5f);
  h.configure({4, 3, 2, 5}, true);
  h.input().assign(h.input().size(), 1.0f);
  auto mask_at = [&](uint64_t stream, int64_t step) {
    h.ctx().random_stream = stream;
    h.ctx().random_step = step;
    return h.forward();
  };
  const auto step0 = mask_at(0, 0);
  const auto step0_again = h.forward();
  const auto step1 = mask_at(0, 1);
  const auto rank1 = mask_at(1, 0);
  EXPECT_NE(step0, step0_again);
  EXPECT_NE(step0, step1);
  EXPECT_NE(step0, rank1);
  EXPECT_EQ(mask_at(0, 0), step0);
  EXPECT_EQ(h.forward(), step0_again);
  EXPECT_EQ(mask_at(0, 1), step1);
}

TEST_P(DropoutGrad, InferenceIsIdentity) {
  LayerHarness h(GetParam());
  h.make<Dropout>(0.5f);
  h.configure({2, 3, 2, 2}, false);
  fill_random(h.input(), 17);
  EXPECT_EQ(h.forward(), h.input());
}

TEST_P(FlattenGrad, FromBlockedLayout) {
  LayerHarness h(GetParam());
  h.make<Flatten>();
  h.configure({2, 16, 2, 3}, true, tag::nChw16c);
  fill_random(h.input(), 18);
  EXPECT_EQ(h.out_dims(), (Dims{2, 96}));
  // Flatten keeps PyTorch's C, H, W order.
  EXPECT_EQ(h.forward(), h.input());
  h.check_all({});
}

TEST_P(PadShortcutGrad, SubsampleAndPad) {
  LayerHarness h(GetParam());
  h.make<PadShortcut>(4, 8, 2);
  h.configure({2, 4, 5, 5}, true);
  fill_random(h.input(), 19);
  EXPECT_EQ(h.out_dims(), (Dims{2, 8, 3, 3}));
  const auto y = h.forward();
  // Channel k of the output is input channel k - 2 at even rows/columns, or zero.
  EXPECT_EQ(y[(0 * 8 + 0) * 9 + 4], 0.f);
  EXPECT_EQ(y[(1 * 8 + 3) * 9 + 4], h.input()[(1 * 4 + 1) * 25 + 2 * 5 + 2]);
  h.check_all({});
}

TEST_P(AddGrad, BothInputs) {
  // L = sum w * (a + b): dL/da = dL/db = w, in each input's own layout.
  LayerHarness h(GetParam());  // no layer: its device buffers and layout conversions
  std::unique_ptr<Add> add = Add::create(h.ctx());
  const Dims d = {2, 16, 2, 2};
  TensorDesc a_desc = to_tensor_desc(memory::desc(d, memory::data_type::f32, tag::nChw16c));
  if (!GetParam().is_cpu()) a_desc = TensorDesc::plain(d);  // blocked layouts are oneDNN's
  a_desc.device = GetParam();
  const TensorDesc b_desc = TensorDesc::plain(d, GetParam());
  const TensorDesc out_desc = add->configure(a_desc, b_desc);
  std::vector<float> a = testing::random_vector(128, 20), b = testing::random_vector(128, 21);
  const std::vector<float> w = testing::random_vector(128, 22);
  const TensorRef a_ref = h.device_buffer(a_desc), b_ref = h.device_buffer(b_desc);
  auto loss = [&] {
    h.from_host(a, a_ref);
    h.from_host(b, b_ref);
    const std::vector<float> y = h.to_host(add->forward(a_ref, b_ref));
    double l = 0;
    for (int i = 0; i < 128; ++i) l += static_cast<double>(w[i]) * y[i];
    return l;
  };
  loss();
  const TensorRef diff = h.device_buffer(out_desc);
  h.from_host(w, diff);
  const std::vector<float> da = h.to_host(add->backward_a(diff));
  const std::vector<float> db = h.to_host(add->backward_b(diff));
  testing::check_gradient("d/da", loss, a.data(), da, {});
  testing::check_gradient("d/db", loss, b.data(), db, {});
}

TEST_P(SoftmaxCrossEntropyGrad, Logits) {
  LayerHarness h(GetParam());
  std::unique_ptr<SoftmaxCrossEntropy> ce = SoftmaxCrossEntropy::create(h.ctx());
  const int n = 4, k = 5;
  const TensorRef zm = h.device_buffer(TensorDesc::plain({n, k}, GetParam()));
  ce->configure(zm.desc, k);
  std::vector<float> z = testing::random_vector(n * k, 23, -3.f, 3.f);
  const int32_t labels[n] = {0, 4, 2, 2};
  auto loss = [&] {
    h.from_host(z, zm);
    return static_cast<double>(ce->forward(zm, labels, nullptr));
  };
  loss();
  testing::check_gradient("d/dlogits", loss, z.data(), h.to_host(ce->backward()),
                          {1e-2f, 1e-2, 1e-4});
  ce->set_label_smoothing(0.2f);
  loss();
  testing::check_gradient("d/dlogits, label smoothing 0.2", loss, z.data(),
                          h.to_host(ce->backward()), {1e-2f, 1e-2, 1e-4});
}

TEST_P(ResidualBlockGrad, BasicBlockPadShortcut) {
  LayerHarness h(GetParam());
  h.adopt(make_basic_block(h.ctx(), "block", 4, 8, 2, ShortcutKind::kPad));
  h.configure({2, 4, 6, 6}, true);
  fill_random(h.input(), 24);
  // ReLUs inside: tolerate the rare coordinate whose step crosses a kink.
  h.check_all({1e-3f, 2e-2, 5e-3, 40, 0.1});
}

TEST_P(ResidualBlockGrad, BasicBlockProjectionShortcut) {
  LayerHarness h(GetParam());
  h.adopt(make_basic_block(h.ctx(), "block", 16, 32, 2, ShortcutKind::kProjection));
  h.configure({2, 16, 4, 4}, true, tag::nChw16c);
  fill_random(h.input(), 25);
  h.check_all({1e-3f, 2e-2, 5e-3, 40, 0.1});
}

TEST_P(ResidualBlockGrad, BasicBlockIdentityShortcut) {
  LayerHarness h(GetParam());
  h.adopt(make_basic_block(h.ctx(), "block", 8, 8, 1, ShortcutKind::kPad));
  h.configure({2, 8, 4, 4}, true);
  fill_random(h.input(), 26);
  h.check_all({1e-3f, 2e-2, 5e-3, 40, 0.1});
}

TEST_P(ResidualBlockGrad, BottleneckBlock) {
  LayerHarness h(GetParam());
  h.adopt(make_bottleneck_block(h.ctx(), "block", 8, 4, 2));
  h.configure({2, 8, 4, 4}, true);
  fill_random(h.input(), 27);
  h.check_all({1e-3f, 2e-2, 5e-3, 30, 0.1});
}

}  // namespace
}  // namespace sdp::nn
