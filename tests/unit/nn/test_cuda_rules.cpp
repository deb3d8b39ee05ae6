// The arithmetic of the CUDA twins that is ours, run on the CPU against the CPU twins: the
// SDP_HOST_DEVICE rules the kernels call (max pooling's windows and gradient gather, the
// NCHW <-> NHWC index map, a folded BatchNorm's statistics and input gradient) and the column-major GEMM shapes LinearCuda hands cuBLAS. These
// run on every machine, so the index math the GPU runs is checked even where no GPU is.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "grad_check.hpp"
#include "nn/batchnorm2d.hpp"
#include "nn/batchnorm_fold_rule.hpp"
#include "nn/layout_rule.hpp"
#include "nn/linear.hpp"
#include "nn/linear_gemm_rule.hpp"
#include "nn/pad_shortcut_rule.hpp"
#include "nn/pool2d.hpp"
#include "nn/pool_rule.hpp"

namespace sdp::nn {
namespace {

using testing::LayerHarness;

// A channel's batch statistics of an NCHW batch [n, c, hw] from its sum and sum of squares, summed in
// f32 as the convolution's genstats epilogue gives them.
BatchNormFoldChannel genstats_statistics(const std::vector<float>& x, int64_t n, int64_t c, int64_t hw, int64_t ch,
                                         float gamma, float beta, float eps) {
  float sum = 0.0f, sq_sum = 0.0f;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < hw; ++p) {
      const float v = x[(b * c + ch) * hw + p];
      sum += v;
      sq_sum += v * v;
    }
  return fold_batch_statistics(sum, sq_sum, static_cast<float>(n * hw), gamma, beta, eps);
}

// PadShortcut's per-element maps (the CUDA kernels' view) against the CPU twin's row loops:
// every output element copies the input the loops copy (or is a zero channel), and every
// input gradient element takes the output gradient the loops scatter there (or is 0).
TEST(CudaRules, PadShortcutIndexMapsMatchTheCpuLoops) {
  for (int64_t stride : {1, 2}) {
    const int64_t n = 2, c = 3, h = 5, w = 7, pad = 2;
    const int64_t oc = c + 2 * pad, oh = (h + stride - 1) / stride, ow = (w + stride - 1) / stride;
    const PadShortcutGeometry g{n, c, h, w, oc, oh, ow, stride, pad};
    std::vector<int64_t> forward(n * oc * oh * ow, -1), backward(n * c * h * w, -1);
    for (int64_t i = 0; i < n; ++i)  // pad_shortcut_cpu.cpp's loops, recording indices
      for (int64_t k = 0; k < c; ++k)
        for (int64_t r = 0; r < oh; ++r)
          for (int64_t q = 0; q < ow; ++q) {
            const int64_t out = ((i * oc + k + pad) * oh + r) * ow + q;
            const int64_t in = ((i * c + k) * h + r * stride) * w + q * stride;
            forward[out] = in;
            backward[in] = out;
          }
    for (int64_t o = 0; o < static_cast<int64_t>(forward.size()); ++o)
      ASSERT_EQ(pad_shortcut_source(g, o), forward[o]) << "stride " << stride << " output " << o;
    for (int64_t i = 0; i < static_cast<int64_t>(backward.size()); ++i)
      ASSERT_EQ(pad_shortcut_grad_source(g, i), backward[i]) << "stride " << stride << " input " << i;
  }
}

// A channels_last model's pad shortcut indexes NHWC: element for element, the NHWC maps move
// the same logical element as the NCHW maps above (channels_last_source relates the two).
TEST(CudaRules, PadShortcutNhwcMapsMoveTheSameElements) {
  for (int64_t stride : {1, 2}) {
    const int64_t n = 2, c = 3, h = 5, w = 7, pad = 2;
    const int64_t oc = c + 2 * pad, oh = (h + stride - 1) / stride, ow = (w + stride - 1) / stride;
    const PadShortcutGeometry plain{n, c, h, w, oc, oh, ow, stride, pad};
    const PadShortcutGeometry nhwc{n, c, h, w, oc, oh, ow, stride, pad, /*nhwc=*/true};
    for (int64_t j = 0; j < n * oc * oh * ow; ++j) {
      const int64_t from = pad_shortcut_source(plain, channels_last_source(j, oc, oh * ow, true));
      const int64_t want = from < 0 ? -1 : channels_last_source(from, c, h * w, false);
      ASSERT_EQ(pad_shortcut_source(nhwc, j), want) << "stride " << stride << " output " << j;
    }
    for (int64_t j = 0; j < n * c * h * w; ++j) {
      const int64_t from = pad_shortcut_grad_source(plain, channels_last_source(j, c, h * w, true));
      const int64_t want = from < 0 ? -1 : channels_last_source(from, oc, oh * ow, false);
      ASSERT_EQ(pad_shortcut_grad_source(nhwc, j), want) << "stride " << stride << " input " << j;
    }
  }
}

TEST(CudaRules, ChannelsLastIndexMapMatchesOneDnnReorder) {
  const Dims d = {2, 5, 3, 4};
  const std::vector<float> x = testing::random_vector(120, 1);
  LayerHarness h(Device::cpu());
  const TensorDesc plain = TensorDesc::plain(d);
  TensorDesc nhwc = plain;
  nhwc.layout = Layout::kChannelsLast;
  const TensorRef p = h.device_buffer(plain), q = h.device_buffer(nhwc);
  copy_bytes(Device::cpu(), p.data, Device::cpu(), x.data(), x.size() * sizeof(float));
  convert_layout(h.ctx(), p, q);  // oneDNN's reorder
  const float* want = q.as<const float>();
  std::vector<float> back(120);
  for (int64_t i = 0; i < 120; ++i) {
    EXPECT_EQ(x[channels_last_source(i, 5, 12, /*to_nhwc=*/true)], want[i]) << i;
    back[i] = want[channels_last_source(i, 5, 12, /*to_nhwc=*/false)];
  }
  EXPECT_EQ(back, x);
}

// pool_rule.hpp over a plain input, the way pool2d_cuda.cu's kernels run it.
struct RuleResult {
  std::vector<float> y, dx;
};
RuleResult max_pool_by_rule(const std::vector<float>& x, const Dims& in, const Pool2dOptions& o,
                            const std::vector<float>& dy) {
  const int64_t oh = (in[2] + 2 * o.padding - o.kernel) / o.stride + 1;
  const int64_t ow = (in[3] + 2 * o.padding - o.kernel) / o.stride + 1;
  const MaxPoolGeometry g{in[0] * in[1], in[2], in[3], oh, ow, o.kernel, o.stride, o.padding};
  RuleResult r;
  r.y.resize(g.planes * oh * ow);
  std::vector<uint8_t> argmax(r.y.size());
  for (int64_t i = 0; i < static_cast<int64_t>(r.y.size()); ++i)
    r.y[i] = max_pool_window(g, x.data(), i, o.fuse_relu, &argmax[i]);
  r.dx.resize(x.size());
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i)
    r.dx[i] = max_pool_input_grad(g, r.y.data(), dy.data(), argmax.data(), i, o.fuse_relu);
  return r;
}

void expect_same(const std::vector<float>& want, const std::vector<float>& got, float tol, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << "[" << i << "]";
      continue;
    }
    EXPECT_NEAR(got[i], want[i], tol) << what << "[" << i << "]";
  }
}

void check_max_pool(const Dims& in, const Pool2dOptions& o, const std::vector<float>& x, const std::string& what,
                    float grad_tol = 0.0f) {
  LayerHarness h(Device::cpu());
  h.make<Pool2d>(o);
  h.configure(in, true);
  h.input() = x;
  const std::vector<float> y = h.forward();
  const std::vector<float> dx = h.backward();
  const RuleResult r = max_pool_by_rule(x, in, o, h.loss_weights());
  expect_same(y, r.y, 0.0f, what + " forward");
  expect_same(dx, r.dx, grad_tol, what + " input gradient");
}

// [n, c, h*w] plain -> NHWC, and back.
std::vector<float> to_nhwc(const std::vector<float>& x, int64_t c, int64_t hw) {
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[channels_last_source(static_cast<int64_t>(i), c, hw, true)];
  return y;
}
std::vector<float> from_nhwc(const std::vector<float>& x, int64_t c, int64_t hw) {
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[channels_last_source(static_cast<int64_t>(i), c, hw, false)];
  return y;
}

// A channels_last model's max pooling: the same rule over NHWC gives the same outputs, argmax
// choices (ties and NaN included) and input gradients as over NCHW, bit for bit.
TEST(CudaRules, MaxPoolOverNhwcMatchesNchw) {
  const Dims in = {2, 3, 7, 7};
  std::vector<float> x = testing::random_vector(294, 7);
  x[10] = x[11];           // a tie
  x[100] = std::nanf("");  // a NaN
  const std::vector<float> dy_plain = testing::random_vector(2 * 3 * 4 * 4, 8);
  for (const Pool2dOptions& o : {max_pool(3, 2, 1), max_pool(3, 2, 1, /*fuse_relu=*/true), max_pool(2, 2)}) {
    const RuleResult plain = max_pool_by_rule(x, in, o, dy_plain);
    const int64_t oh = (in[2] + 2 * o.padding - o.kernel) / o.stride + 1;
    const int64_t ow = (in[3] + 2 * o.padding - o.kernel) / o.stride + 1;
    const MaxPoolGeometry g{in[0] * in[1],      in[2], in[3], oh, ow, o.kernel, o.stride, o.padding,
                            /*nhwc_channels=*/3};
    const std::vector<float> xn = to_nhwc(x, 3, 49);
    std::vector<float> dy(dy_plain.begin(), dy_plain.begin() + g.planes * oh * ow);
    dy = to_nhwc(dy, 3, oh * ow);
    std::vector<float> y(dy.size());
    std::vector<uint8_t> argmax(y.size());
    for (int64_t i = 0; i < static_cast<int64_t>(y.size()); ++i)
      y[i] = max_pool_window(g, xn.data(), i, o.fuse_relu, &argmax[i]);
    std::vector<float> dx(x.size());
    for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i)
      dx[i] = max_pool_input_grad(g, y.data(), dy.data(), argmax.data(), i, o.fuse_relu);
    expect_same(plain.y, from_nhwc(y, 3, oh * ow), 0.0f, "nhwc forward");
    expect_same(plain.dx, from_nhwc(dx, 3, 49), 0.0f, "nhwc input gradient");
  }
}

// The GPU's NHWC kernels take 8 (16-bit) or 4 (f32) channels a thread: the vector rules give
// the scalar rules' outputs, argmaxes and input gradients bit for bit, ties, NaN, padding and
// a fused ReLU included.
template <int V>
void expect_vector_rules_match_scalar(const Pool2dOptions& o, int64_t c) {
  const Dims in = {2, c, 9, 7};
  const int64_t oh = (in[2] + 2 * o.padding - o.kernel) / o.stride + 1;
  const int64_t ow = (in[3] + 2 * o.padding - o.kernel) / o.stride + 1;
  const MaxPoolGeometry g{in[0] * c, in[2], in[3], oh, ow, o.kernel, o.stride, o.padding, c};
  std::vector<float> x = testing::random_vector(testing::numel(in), 21);
  x[c * 3 + 1] = x[c * 4 + 1];  // a tie inside one window
  x[c * 10 + 2] = std::nanf("");
  const std::vector<float> dy = testing::random_vector(in[0] * c * oh * ow, 22);
  const auto load = [](const float* p, float* v) { std::copy(p, p + V, v); };
  const auto load_bytes = [](const uint8_t* p, uint8_t* b) { std::copy(p, p + V, b); };
  std::vector<float> y(dy.size()), y_vec(dy.size());
  std::vector<uint8_t> argmax(dy.size()), argmax_vec(dy.size());
  for (int64_t i = 0; i < static_cast<int64_t>(y.size()); ++i)
    y[i] = max_pool_window(g, x.data(), i, o.fuse_relu, &argmax[i]);
  for (int64_t i = 0; i < static_cast<int64_t>(y.size()); i += V)
    max_pool_window_nhwc<V, float, int64_t>(g, x.data(), i, o.fuse_relu, load, &y_vec[i], &argmax_vec[i]);
  const std::string what = "k" + std::to_string(o.kernel) + " s" + std::to_string(o.stride) + " p" +
                           std::to_string(o.padding) + (o.fuse_relu ? " relu" : "") + " V" + std::to_string(V);
  expect_same(y, y_vec, 0.0f, what + " forward");
  EXPECT_EQ(argmax, argmax_vec) << what;
  std::vector<float> dx(x.size()), dx_vec(x.size());
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i)
    dx[i] = max_pool_input_grad(g, y.data(), dy.data(), argmax.data(), i, o.fuse_relu);
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); i += V)
    max_pool_input_grad_nhwc<V, float, int64_t>(g, y.data(), dy.data(), argmax.data(), i, o.fuse_relu, load, load_bytes,
                                                &dx_vec[i]);
  expect_same(dx, dx_vec, 0.0f, what + " input gradient");
}

TEST(CudaRules, MaxPoolVectorRulesMatchTheScalarRules) {
  for (const Pool2dOptions& o :
       {max_pool(3, 2, 1), max_pool(3, 2, 1, /*fuse_relu=*/true), max_pool(2, 2), max_pool(3, 3), max_pool(5, 1, 2)}) {
    expect_vector_rules_match_scalar<8>(o, 16);
    expect_vector_rules_match_scalar<4>(o, 12);
  }
}

TEST(CudaRules, MaxPoolMatchesTheCpuTwin) {
  const Dims a = {2, 3, 8, 8}, b = {2, 3, 7, 7}, c = {2, 3, 7, 9};
  check_max_pool(a, max_pool(2, 2), testing::random_vector(384, 2), "2/2");
  // Overlapping windows: one input may collect several windows' gradients (summed in
  // another order by oneDNN).
  check_max_pool(b, max_pool(3, 2, 1), testing::random_vector(294, 3), "3/2/1", 1e-6f);
  check_max_pool(c, max_pool(2, 2, 0, /*fuse_relu=*/true), testing::random_vector(378, 4), "2/2 relu");
  check_max_pool(b, max_pool(3, 2, 1, /*fuse_relu=*/true), testing::random_vector(294, 5), "3/2/1 relu", 1e-6f);
  check_max_pool(c, max_pool(3, 3), testing::random_vector(378, 6), "3/3, last column unpooled");
}

TEST(CudaRules, MaxPoolTiesGoToTheFirstMaximumAndNanPropagates) {
  check_max_pool({1, 3, 5, 4}, max_pool(2, 2, 0, true), std::vector<float>(60, 1.f), "constant, relu");
  check_max_pool({1, 2, 6, 6}, max_pool(3, 2, 1), std::vector<float>(72, -2.f), "constant, padded");
  LayerHarness h(Device::cpu());
  h.make<Pool2d>(max_pool(2, 2));
  h.configure({1, 1, 2, 4}, false);
  h.input() = {5.f, NAN, NAN, -1.f, 1.f, 2.f, 3.f, 4.f};
  const std::vector<float> y = h.forward();
  const RuleResult r = max_pool_by_rule(h.input(), {1, 1, 2, 4}, max_pool(2, 2), {0.f, 0.f});
  ASSERT_EQ(r.y.size(), 2u);
  EXPECT_TRUE(std::isnan(y[0]) && std::isnan(r.y[0]));
  EXPECT_TRUE(std::isnan(y[1]) && std::isnan(r.y[1]));
}

// C = op(A) op(B), column-major, as cublasSgemm with alpha 1 and beta 0.
void reference_gemm(const GemmShape& g, const float* a, const float* b, float* c) {
  for (int i = 0; i < g.m; ++i)
    for (int j = 0; j < g.n; ++j) {
      double acc = 0.0;
      for (int l = 0; l < g.k; ++l) {
        const float av = g.trans_a ? a[l + i * g.lda] : a[i + l * g.lda];
        const float bv = g.trans_b ? b[j + l * g.ldb] : b[l + j * g.ldb];
        acc += static_cast<double>(av) * bv;
      }
      c[i + j * g.ldc] = static_cast<float>(acc);
    }
}

// A BatchNorm folded into the convolutions around it (model.batchnorm: folded) computes what the
// CPU BatchNorm2d with its ReLU computes: from each channel's sum and sum of squares (what the
// convolution before sums in its epilogue) the running statistics and relu(x * scale + bias),
// the layer's output; from the pre-activation's gradient (the convolution after's input
// gradient through the ReLU) and its sums dscale and dbias (cuDNN's dbn_weight), the weight
// gradients and, in one pass, the input gradient. Two steps, so the running statistics' update
// is checked from values other than their initial ones; then evaluation, from those statistics.
TEST(CudaRules, FoldedBatchNormMatchesTheCpuBatchNormWithItsRelu) {
  const int64_t n = 4, c = 3, h = 5, w = 6, hw = h * w, m = n * hw;
  BatchNorm2dOptions o;
  o.channels = static_cast<int>(c);
  o.fuse_relu = true;
  LayerHarness bn(Device::cpu());
  bn.make<BatchNorm2d>(o);
  ParameterStore& store = bn.store();
  const std::vector<float> gamma = testing::random_vector(c, 40, 0.5f, 1.5f), beta = testing::random_vector(c, 41);
  testing::set_values(store.params()[0].value, gamma);
  testing::set_values(store.params()[1].value, beta);
  std::vector<float> running_mean(c, 0.0f), running_var(c, 1.0f);
  bn.configure({n, c, h, w}, true);
  for (int step = 0; step < 2; ++step) {
    std::vector<float> x = testing::random_vector(n * c * hw, 42 + step);
    for (float& v : x) v = 0.8f * v + 0.3f;  // a mean away from 0
    bn.input() = x;
    const std::vector<float> y = bn.forward();
    const std::vector<float> dx = bn.backward();  // dy: the harness's loss weights
    const std::vector<float>& dy = bn.loss_weights();
    const auto at = [&](int64_t b, int64_t ch, int64_t p) { return (b * c + ch) * hw + p; };
    for (int64_t ch = 0; ch < c; ++ch) {
      const BatchNormFoldChannel f = genstats_statistics(x, n, c, hw, ch, gamma[ch], beta[ch], o.eps);
      running_mean[ch] = batchnorm_running_mean(running_mean[ch], f.mean, o.momentum);
      running_var[ch] = batchnorm_running_var(running_var[ch], f.var, static_cast<float>(m), o.momentum);
      float dscale = 0.0f, dbias = 0.0f;
      std::vector<float> drelu(m);
      for (int64_t b = 0; b < n; ++b)
        for (int64_t p = 0; p < hw; ++p) {
          const int64_t i = at(b, ch, p);
          const float pre = x[i] * f.scale + f.bias;
          EXPECT_NEAR(std::max(pre, 0.0f), y[i], 2e-5f) << "output, step " << step << " channel " << ch;
          drelu[b * hw + p] = pre > 0.0f ? dy[i] : 0.0f;
          dscale += drelu[b * hw + p] * (x[i] - f.mean) * f.inv_std;
          dbias += drelu[b * hw + p];
        }
      EXPECT_NEAR(dscale, testing::host_values(store.params()[0].grad)[ch], 2e-4f) << "gamma's gradient";
      EXPECT_NEAR(dbias, testing::host_values(store.params()[1].grad)[ch], 2e-4f) << "beta's gradient";
      const BatchNormInputGradCoefficients k =
          batchnorm_input_grad_coefficients(dscale, dbias, f.mean, f.inv_std, gamma[ch], static_cast<float>(m));
      for (int64_t b = 0; b < n; ++b)
        for (int64_t p = 0; p < hw; ++p) {
          const int64_t i = at(b, ch, p);
          EXPECT_NEAR(fold_input_grad_element(k, drelu[b * hw + p], x[i]), dx[i], 2e-5f)
              << "input gradient, step " << step << " channel " << ch;
        }
    }
    const std::vector<float> cpu_mean = testing::host_values(store.buffers()[0].value);
    const std::vector<float> cpu_var = testing::host_values(store.buffers()[1].value);
    for (int64_t ch = 0; ch < c; ++ch) {
      EXPECT_NEAR(running_mean[ch], cpu_mean[ch], 1e-6f) << "running mean, step " << step;
      EXPECT_NEAR(running_var[ch], cpu_var[ch], 1e-6f) << "running variance, step " << step;
    }
  }
  // Evaluation: relu(x * scale + bias) with the running statistics' scale and bias.
  bn.configure({n, c, h, w}, false);
  std::vector<float> x = testing::random_vector(n * c * hw, 50);
  bn.input() = x;
  const std::vector<float> y = bn.forward();
  for (int64_t i = 0; i < n * c * hw; ++i) {
    const int64_t ch = (i / hw) % c;
    const BatchNormFoldChannel f = fold_running_statistics(running_mean[ch], running_var[ch], gamma[ch], beta[ch], o.eps);
    EXPECT_NEAR(std::max(x[i] * f.scale + f.bias, 0.0f), y[i], 2e-5f) << "evaluation, element " << i;
  }
}

// The branch's last BatchNorm folded with the block's sum (model.batchnorm: folded): its output
// relu(x * scale + bias + z) from the genstats sums is the CPU BatchNorm's output plus z through a
// ReLU; the mask has element j at bit j % 8 of byte j / 8; and the batchnorm backward through
// that mask (what cuDNN's graph computes: dz = dy * mask, dscale = sum(dz * xhat), dbias = sum(dz),
// dx from the coefficients) is the CPU BatchNorm's backward given dz. A projection shortcut's
// BatchNorm folded into that pass: its term, x_sc * scale_sc + bias_sc from its saved statistics, is
// the CPU BatchNorm's output of x_sc.
TEST(CudaRules, FoldedResidualBatchNormMatchesTheCpuBatchNormSumAndRelu) {
  EXPECT_EQ(relu_mask_byte(0), 0);
  EXPECT_EQ(relu_mask_bit(0), 0x01);
  EXPECT_EQ(relu_mask_byte(13), 1);
  EXPECT_EQ(relu_mask_bit(13), 0x20);
  EXPECT_EQ(relu_mask_byte(23), 2);
  EXPECT_EQ(relu_mask_bit(23), 0x80);
  const int64_t n = 3, c = 4, h = 5, w = 2, hw = h * w, m = n * hw;
  BatchNorm2dOptions o;
  o.channels = static_cast<int>(c);
  LayerHarness bn(Device::cpu());
  bn.make<BatchNorm2d>(o);
  ParameterStore& store = bn.store();
  const std::vector<float> gamma = testing::random_vector(c, 60, 0.5f, 1.5f), beta = testing::random_vector(c, 61);
  testing::set_values(store.params()[0].value, gamma);
  testing::set_values(store.params()[1].value, beta);
  bn.configure({n, c, h, w}, true);
  std::vector<float> x = testing::random_vector(n * c * hw, 62);
  for (float& v : x) v = 0.7f * v - 0.2f;
  const std::vector<float> z = testing::random_vector(n * c * hw, 63);
  bn.input() = x;
  const std::vector<float> y_bn = bn.forward();
  {
    LayerHarness shortcut(Device::cpu());
    shortcut.make<BatchNorm2d>(o);
    const std::vector<float> g = testing::random_vector(c, 65, 0.5f, 1.5f), b = testing::random_vector(c, 66);
    testing::set_values(shortcut.store().params()[0].value, g);
    testing::set_values(shortcut.store().params()[1].value, b);
    shortcut.configure({n, c, h, w}, true);
    shortcut.input() = z;  // the shortcut convolution's output
    const std::vector<float> z_bn = shortcut.forward();
    for (int64_t ch = 0; ch < c; ++ch) {
      const BatchNormFoldChannel f = genstats_statistics(z, n, c, hw, ch, g[ch], b[ch], o.eps);
      const BatchNormFoldChannel saved = fold_saved_statistics(f.mean, f.inv_std, g[ch], b[ch]);
      for (int64_t b_ = 0; b_ < n; ++b_)
        for (int64_t p = 0; p < hw; ++p) {
          const int64_t i = (b_ * c + ch) * hw + p;
          EXPECT_NEAR(fold_shortcut_element(saved, z[i]), z_bn[i], 2e-5f) << "the shortcut's term, channel " << ch;
        }
    }
  }
  const auto at = [&](int64_t b, int64_t ch, int64_t p) { return (b * c + ch) * hw + p; };
  // The mask in NHWC order, as the kernel packs it.
  std::vector<uint8_t> mask((n * hw * c + 7) / 8, 0);
  std::vector<float> dz(n * c * hw);
  const std::vector<float> dy = testing::random_vector(n * c * hw, 64);
  for (int64_t ch = 0; ch < c; ++ch) {
    const BatchNormFoldChannel stats = genstats_statistics(x, n, c, hw, ch, gamma[ch], beta[ch], o.eps);
    const BatchNormFoldChannel saved = fold_saved_statistics(stats.mean, stats.inv_std, gamma[ch], beta[ch]);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t p = 0; p < hw; ++p) {
        const int64_t i = at(b, ch, p), nhwc = (b * hw + p) * c + ch;
        const float y = fold_residual_output_element(saved, x[i], z[i]);
        EXPECT_NEAR(std::max(y_bn[i] + z[i], 0.0f), y, 2e-5f) << "output, channel " << ch;
        if (y > 0.0f) mask[relu_mask_byte(nhwc)] |= relu_mask_bit(nhwc);
      }
  }
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p) {
        const int64_t i = at(b, ch, p), nhwc = (b * hw + p) * c + ch;
        const bool positive = y_bn[i] + z[i] > 0.0f;
        EXPECT_EQ((mask[relu_mask_byte(nhwc)] & relu_mask_bit(nhwc)) != 0, positive) << "mask bit " << nhwc;
        dz[i] = positive ? dy[i] : 0.0f;  // the graph's dy * mask: the sum's gradient, z's
      }
  bn.loss_weights() = dz;
  const std::vector<float> dx = bn.backward();
  const std::vector<float> dgamma = testing::host_values(store.params()[0].grad);
  const std::vector<float> dbeta = testing::host_values(store.params()[1].grad);
  for (int64_t ch = 0; ch < c; ++ch) {
    const BatchNormFoldChannel f = genstats_statistics(x, n, c, hw, ch, gamma[ch], beta[ch], o.eps);
    float dscale = 0.0f, dbias = 0.0f;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t p = 0; p < hw; ++p) {
        const int64_t i = at(b, ch, p);
        dscale += dz[i] * (x[i] - f.mean) * f.inv_std;
        dbias += dz[i];
      }
    EXPECT_NEAR(dscale, dgamma[ch], 2e-4f) << "gamma's gradient, channel " << ch;
    EXPECT_NEAR(dbias, dbeta[ch], 2e-4f) << "beta's gradient, channel " << ch;
    const BatchNormInputGradCoefficients k =
        batchnorm_input_grad_coefficients(dscale, dbias, f.mean, f.inv_std, gamma[ch], static_cast<float>(m));
    for (int64_t b = 0; b < n; ++b)
      for (int64_t p = 0; p < hw; ++p) {
        const int64_t i = at(b, ch, p);
        EXPECT_NEAR(fold_input_grad_element(k, dz[i], x[i]), dx[i], 2e-5f) << "input gradient, channel " << ch;
      }
  }
}

TEST(CudaRules, LinearGemmShapesMatchTheCpuTwin) {
  const int batch = 6, in = 11, out = 7;
  LayerHarness h(Device::cpu());
  auto& fc = h.make<Linear>(LinearOptions{in, out, false});
  h.configure({batch, in}, true);
  h.input() = testing::random_vector(batch * in, 8);
  const std::vector<float> y = h.forward();
  const std::vector<float> dx = h.backward();
  const std::vector<float> dw = testing::host_values(fc.weight().grad);
  const std::vector<float> w = testing::host_values(fc.weight().value);
  const std::vector<float>& x = h.input();
  const std::vector<float>& dy = h.loss_weights();
  const LinearGemms g = linear_gemms(batch, in, out);
  std::vector<float> y_rule(batch * out), dw_rule(out * in), dx_rule(batch * in);
  reference_gemm(g.forward, w.data(), x.data(), y_rule.data());
  reference_gemm(g.weight_grad, x.data(), dy.data(), dw_rule.data());
  reference_gemm(g.input_grad, w.data(), dy.data(), dx_rule.data());
  expect_same(y, y_rule, 1e-5f, "forward");
  expect_same(dw, dw_rule, 1e-5f, "weight gradient");
  expect_same(dx, dx_rule, 1e-5f, "input gradient");
}

}  // namespace
}  // namespace sdp::nn
