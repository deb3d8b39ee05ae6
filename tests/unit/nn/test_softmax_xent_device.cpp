// The CUDA softmax cross-entropy (softmax_xent_cuda.hpp) against the CPU's rows
// (softmax_xent_rule.hpp), from the same logits and labels. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/device_info.hpp"
#include "core/device_memory.hpp"
#include "nn/softmax_xent_cuda.hpp"
#include "nn/softmax_xent_rule.hpp"

namespace sdp::nn {
namespace {

#ifdef SDP_HAVE_CUDA
template <typename T>
std::shared_ptr<void> to_device(const std::vector<T>& host) {
  auto p = allocate(Device::cuda(0), host.size() * sizeof(T));
  copy_bytes(Device::cuda(0), p.get(), Device::cpu(), host.data(), host.size() * sizeof(T));
  return p;
}
template <typename T>
std::vector<T> to_host(const std::shared_ptr<void>& device, std::size_t count) {
  std::vector<T> out(count);
  copy_bytes(Device::cpu(), out.data(), Device::cuda(0), device.get(), count * sizeof(T));
  return out;
}

void expect_gpu_matches_cpu(int64_t n, int k, float smoothing, bool bad_label) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(n * k);
  for (float& z : logits) z = normal(rng);
  std::vector<int32_t> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<int32_t>(rng() % k);
  if (bad_label) labels[n / 2] = k;  // one past the last class
  // CPU reference, row by row.
  const XentTarget q = xent_target(smoothing, k);
  std::vector<float> want_grad(n * k, 0.0f);
  double want_loss = 0.0;
  int64_t want_hits = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= k) continue;
    int argmax = 0;
    want_loss += softmax_xent_row(logits.data() + i * k, k, labels[i], q, 1.0f / static_cast<float>(n),
                                  want_grad.data() + i * k, &argmax);
    want_hits += argmax == labels[i];
  }
  auto d_logits = to_device(logits);
  auto d_labels = to_device(labels);
  auto d_grad = allocate(Device::cuda(0), n * k * sizeof(float));
  auto d_rows = allocate(Device::cuda(0), 2 * n * sizeof(double));
  auto d_totals = allocate(Device::cuda(0), 2 * sizeof(double));
  auto d_bad = allocate(Device::cuda(0), sizeof(int));
  cuda_xent::forward(DType::kF32, d_logits.get(), static_cast<const int32_t*>(d_labels.get()), n, k, smoothing,
                     /*loss_scale=*/1.0f, static_cast<float*>(d_grad.get()), static_cast<double*>(d_rows.get()),
                     static_cast<double*>(d_totals.get()), static_cast<int*>(d_bad.get()), nullptr);
  const std::vector<float> grad = to_host<float>(d_grad, n * k);
  const std::vector<double> totals = to_host<double>(d_totals, 2);
  const std::vector<int> bad = to_host<int>(d_bad, 1);
  EXPECT_EQ(bad[0] != 0, bad_label);
  EXPECT_NEAR(totals[0], want_loss, 1e-5 * std::max(1.0, std::fabs(want_loss)));
  EXPECT_EQ(static_cast<int64_t>(totals[1]), want_hits);
  for (int64_t i = 0; i < n * k; ++i)
    ASSERT_NEAR(grad[i], want_grad[i], 1e-5f * std::fabs(want_grad[i]) + 1e-8f) << "element " << i;
}
#endif

TEST(SoftmaxXentOnDevice, MatchesTheCpuRows) {
#ifndef SDP_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  expect_gpu_matches_cpu(128, 10, 0.0f, false);
  expect_gpu_matches_cpu(257, 10, 0.1f, false);
  expect_gpu_matches_cpu(64, 1000, 0.1f, false);
#endif
}

TEST(SoftmaxXentOnDevice, FlagsALabelOutsideTheClasses) {
#ifndef SDP_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  expect_gpu_matches_cpu(33, 10, 0.0f, true);
#endif
}

}  // namespace
}  // namespace sdp::nn
