// The hand-written CPU loops of nn/ (the direct max pool, the one-input-channel convolution's
// weight gradient) on every ISA this CPU has, against the baseline variant, bitwise: the
// pool only compares and copies, and the gradient's lanes are channels, each summed in the
// same order on every ISA. The weight gradient is also checked against a plain sum.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "nn/direct_conv_grad.hpp"
#include "nn/direct_max_pool.hpp"

namespace sdp::nn {
namespace {

using tag = memory::format_tag;

std::vector<float> random_values(std::size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

ActivationLayout layout_of(const Dims& dims, tag t) {
  return *activation_layout(memory::desc(dims, memory::data_type::f32, t));
}

struct PoolCase {
  Dims in;
  tag layout;
  int expected_lanes;
};

TEST(DirectMaxPoolIsa, EveryVariantMatchesTheBaseline) {
  // LeNet-5's pool1 as oneDNN lays it out on an AVX2 machine (6 channels in a block of 8) and
  // on an AVX-512 one (a block of 16); 20 channels over two blocks; NCHW (the scalar loop).
  const std::vector<PoolCase> cases = {{{3, 6, 8, 10}, tag::nChw8c, 8},
                                       {{3, 6, 8, 10}, tag::nChw16c, 16},
                                       {{2, 20, 6, 7}, tag::nChw8c, 8},
                                       {{2, 20, 6, 7}, tag::nChw16c, 16},
                                       {{2, 16, 6, 6}, tag::acdb, 16},
                                       {{2, 5, 6, 6}, tag::abcd, 0}};
  for (const PoolCase& c : cases)
    for (bool relu : {false, true}) {
      const Dims out = {c.in[0], c.in[1], c.in[2] / 2, c.in[3] / 2};
      const ActivationLayout src = layout_of(c.in, c.layout), dst = layout_of(out, c.layout);
      const DirectMaxPool pool({out[0], out[1], out[2], out[3], 2}, src, dst);
      SCOPED_TRACE("layout " + std::to_string(static_cast<int>(c.layout)) + ", relu " + std::to_string(relu));
      EXPECT_EQ(pool.lanes(), c.expected_lanes);
      const std::size_t in_size = memory::desc(c.in, memory::data_type::f32, c.layout).get_size() / 4;
      const std::size_t out_size = memory::desc(out, memory::data_type::f32, c.layout).get_size() / 4;
      std::vector<float> x = random_values(in_size, 3);
      const std::vector<float> dy = random_values(out_size, 4);
      std::vector<float> want_y(out_size, 0.f), want_dx(in_size, 0.f);
      std::vector<uint8_t> want_am(out[0] * out[1] * out[2] * out[3]);
      pool.forward(relu, x.data(), want_y.data(), want_am.data(), CpuIsa::baseline);
      pool.backward(dy.data(), want_am.data(), want_dx.data(), CpuIsa::baseline);
      for (CpuIsa isa : supported_cpu_isas()) {
        std::vector<float> y(out_size, 0.f), dx(in_size, 0.f);
        std::vector<uint8_t> am(want_am.size());
        pool.forward(relu, x.data(), y.data(), am.data(), isa);
        pool.backward(dy.data(), am.data(), dx.data(), isa);
        EXPECT_EQ(0, std::memcmp(y.data(), want_y.data(), out_size * 4)) << cpu_isa_name(isa);
        EXPECT_EQ(am, want_am) << cpu_isa_name(isa);
        EXPECT_EQ(0, std::memcmp(dx.data(), want_dx.data(), in_size * 4)) << cpu_isa_name(isa);
      }
    }
}

struct ConvCase {
  int64_t batch, out_channels, in_h, in_w;
  int kernel, stride, padding;
  tag layout;
  bool bias;
};

TEST(DirectConvWeightGradIsa, MatchesAPlainSumOnEveryIsaBitwiseAcrossIsas) {
  const std::vector<ConvCase> cases = {
      {4, 6, 28, 28, 5, 1, 2, tag::nChw8c, true},    // LeNet-5's conv1, AVX2 layout
      {4, 6, 28, 28, 5, 1, 2, tag::nChw16c, true},   // and AVX-512's
      {3, 20, 9, 11, 3, 2, 1, tag::nChw8c, false},   // three blocks of 8, stride 2
      {3, 20, 9, 11, 3, 2, 1, tag::nChw16c, true},   // two blocks of 16
      {2, 5, 10, 9, 4, 1, 0, tag::nChw8c, true},     // a kernel without its own loop
      {5, 16, 7, 7, 7, 1, 3, tag::nChw16c, true}};
  for (const ConvCase& c : cases) {
    const int64_t oh = (c.in_h + 2 * c.padding - c.kernel) / c.stride + 1;
    const int64_t ow = (c.in_w + 2 * c.padding - c.kernel) / c.stride + 1;
    const Dims out = {c.batch, c.out_channels, oh, ow};
    const ActivationLayout dy_layout = layout_of(out, c.layout);
    const DirectConvGradShape shape{c.batch, c.out_channels, c.in_h, c.in_w, oh, ow, c.kernel, c.stride, c.padding};
    ASSERT_TRUE(DirectConvWeightGrad::supports(shape, dy_layout));
    DirectConvWeightGrad grad(shape, dy_layout);
    const std::vector<float> x = random_values(c.batch * c.in_h * c.in_w, 5);
    std::vector<float> dy = random_values(memory::desc(out, memory::data_type::f32, c.layout).get_size() / 4, 6);
    const int64_t k2 = int64_t{c.kernel} * c.kernel;
    std::vector<float> want_dw(c.out_channels * k2), want_db(c.out_channels);
    grad.compute(x.data(), dy.data(), want_dw.data(), c.bias ? want_db.data() : nullptr, CpuIsa::baseline);
    // The plain sum, in double.
    const auto dy_at = [&](int64_t n, int64_t ch, int64_t h, int64_t w) {
      return dy[n * dy_layout.n_stride + (ch / dy_layout.block) * dy_layout.c_stride + h * dy_layout.h_stride +
                w * dy_layout.w_stride + ch % dy_layout.block];
    };
    for (int64_t ch = 0; ch < c.out_channels; ++ch) {
      double bias = 0;
      for (int64_t n = 0; n < c.batch; ++n)
        for (int64_t h = 0; h < oh; ++h)
          for (int64_t w = 0; w < ow; ++w) bias += dy_at(n, ch, h, w);
      if (c.bias) EXPECT_NEAR(want_db[ch], bias, 1e-4 * (1 + std::abs(bias))) << "db channel " << ch;
      for (int kh = 0; kh < c.kernel; ++kh)
        for (int kw = 0; kw < c.kernel; ++kw) {
          double sum = 0;
          for (int64_t n = 0; n < c.batch; ++n)
            for (int64_t h = 0; h < oh; ++h)
              for (int64_t w = 0; w < ow; ++w) {
                const int64_t ih = h * c.stride + kh - c.padding, iw = w * c.stride + kw - c.padding;
                if (ih < 0 || iw < 0 || ih >= c.in_h || iw >= c.in_w) continue;
                sum += double{x[(n * c.in_h + ih) * c.in_w + iw]} * dy_at(n, ch, h, w);
              }
          EXPECT_NEAR(want_dw[ch * k2 + kh * c.kernel + kw], sum, 1e-4 * (1 + std::abs(sum)))
              << "dw channel " << ch << " (" << kh << ", " << kw << ")";
        }
    }
    for (CpuIsa isa : supported_cpu_isas()) {
      std::vector<float> dw(want_dw.size()), db(want_db.size());
      grad.compute(x.data(), dy.data(), dw.data(), c.bias ? db.data() : nullptr, isa);
      EXPECT_EQ(0, std::memcmp(dw.data(), want_dw.data(), dw.size() * 4)) << cpu_isa_name(isa);
      EXPECT_EQ(0, std::memcmp(db.data(), want_db.data(), db.size() * 4)) << cpu_isa_name(isa);
    }
  }
}

TEST(DirectConvWeightGradIsa, RefusesWhatItDoesNotHandle) {
  const DirectConvGradShape shape{2, 6, 8, 8, 6, 6, 3, 1, 0};
  EXPECT_FALSE(DirectConvWeightGrad::supports(shape, layout_of({2, 6, 6, 6}, tag::abcd)));
  EXPECT_FALSE(DirectConvWeightGrad::supports(shape, layout_of({2, 6, 6, 6}, tag::acdb)));
  EXPECT_TRUE(DirectConvWeightGrad::supports(shape, layout_of({2, 6, 6, 6}, tag::nChw8c)));
  DirectConvGradShape big = shape;
  big.kernel = 12;
  EXPECT_FALSE(DirectConvWeightGrad::supports(big, layout_of({2, 6, 6, 6}, tag::nChw8c)));
}

}  // namespace
}  // namespace sdp::nn
