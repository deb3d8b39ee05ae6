// What the GPU-against-CPU tests share (test_cuda_vs_cpu.cpp, test_amp_cuda.cpp): the skip
// without a GPU, the element-wise comparison and the small models both devices build.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/device_info.hpp"
#include "grad_check.hpp"
#include "nn/batchnorm2d.hpp"
#include "nn/conv2d.hpp"
#include "nn/dropout.hpp"
#include "nn/flatten.hpp"
#include "nn/linear.hpp"
#include "nn/model.hpp"
#include "nn/pool2d.hpp"
#include "nn/relu.hpp"
#include "nn/residual_block.hpp"

#define SKIP_WITHOUT_GPU()                                                  \
  do {                                                                      \
    if (sdp::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";    \
  } while (0)

namespace sdp::nn::testing {

// Every element within tol * max|cpu| of the CPU's (both NaN counts as equal).
inline void expect_close(const std::vector<float>& cpu, const std::vector<float>& gpu, double tol,
                         const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  double scale = 0.0;
  for (float v : cpu) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  int reported = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const bool both_nan = std::isnan(cpu[i]) && std::isnan(gpu[i]);
    if (both_nan || std::fabs(static_cast<double>(gpu[i]) - cpu[i]) <= tol * scale) continue;
    if (reported++ < 5) ADD_FAILURE() << what << "[" << i << "]: cpu " << cpu[i] << " gpu " << gpu[i];
  }
  EXPECT_EQ(reported, 0) << what << ": elements off (tolerance " << tol << " * " << scale << ")";
}

// ||gpu - cpu|| / ||cpu||: the whole tensor's error, for quantities (a model's gradients)
// where single small elements may lose most of their bits.
inline double relative_error(const std::vector<float>& cpu, const std::vector<float>& gpu) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    diff += (static_cast<double>(gpu[i]) - cpu[i]) * (static_cast<double>(gpu[i]) - cpu[i]);
    norm += static_cast<double>(cpu[i]) * cpu[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// Runs the configured harnesses (same input set) forward, and backward when `training`:
// output, buffers (BN statistics), input gradient and parameter gradients agree to `tol`.
inline void expect_same_pass(LayerHarness& cpu, LayerHarness& gpu, bool training, double tol,
                             const std::string& what) {
  expect_close(cpu.forward(), gpu.forward(), tol, what + " forward");
  for (std::size_t b = 0; b < cpu.store().buffers().size(); ++b)
    expect_close(host_values(cpu.store().buffers()[b].value), host_values(gpu.store().buffers()[b].value), tol,
                 what + " " + cpu.store().buffers()[b].name);
  if (!training) return;
  expect_close(cpu.backward(), gpu.backward(), tol, what + " input gradient");
  for (std::size_t p = 0; p < cpu.store().params().size(); ++p)
    expect_close(host_values(cpu.store().params()[p].grad), host_values(gpu.store().params()[p].grad), tol,
                 what + " gradient of " + cpu.store().params()[p].name);
}

// A tiny ResNet with every CUDA layer but Dropout: conv, BN with ReLU, max pool, a padded and
// a projected basic block, global average pool, flatten, linear.
inline std::unique_ptr<Model> tiny_resnet(Device device) {
  auto m = std::make_unique<Model>("tiny", Shape{3, 8, 8}, 5, /*seed=*/5, device);
  m->add<Conv2d>("conv1", Conv2dOptions{3, 8, 3, 1, 1, false, false});
  m->add<BatchNorm2d>("bn1", BatchNorm2dOptions{8, 1e-5f, 0.1f, true});
  m->add<Pool2d>("pool", max_pool(2, 2));
  m->add(make_basic_block(m->context(), "layer1.0", 8, 8, 1, ShortcutKind::kPad));
  m->add(make_basic_block(m->context(), "layer2.0", 8, 16, 2, ShortcutKind::kProjection));
  m->add<Pool2d>("avgpool", global_avg_pool());
  m->add<Flatten>("flatten");
  m->add<Linear>("fc", LinearOptions{16, 5, true});
  m->build();
  return m;
}

// Bottleneck blocks (ResNet-50's), with a projection and an identity shortcut: on the
// channels_last path each block's last BatchNorm fuses the sum and the ReLU. [N, 3, 16, 16], 6 classes.
inline std::unique_ptr<Model> bottleneck_resnet(Device device) {
  auto m = std::make_unique<Model>("bottleneck", Shape{3, 16, 16}, 6, /*seed=*/11, device);
  m->add<Conv2d>("conv1", Conv2dOptions{3, 16, 7, 2, 3, false, false});
  m->add<BatchNorm2d>("bn1", BatchNorm2dOptions{16, 1e-5f, 0.1f, true});
  m->add<Pool2d>("maxpool", max_pool(3, 2, 1));
  m->add(make_bottleneck_block(m->context(), "layer1.0", 16, 8, 1));
  m->add(make_bottleneck_block(m->context(), "layer1.1", 32, 8, 1));
  m->add(make_bottleneck_block(m->context(), "layer2.0", 32, 16, 2));
  m->add<Pool2d>("avgpool", global_avg_pool());
  m->add<Flatten>("flatten");
  m->add<Linear>("fc", LinearOptions{64, 6, true});
  m->build();
  return m;
}

// [N, 1, 8, 8] -> flatten -> linear 48 -> relu -> dropout 0.2 -> linear 10.
inline std::unique_ptr<Model> mlp_with_dropout(Device device) {
  auto m = std::make_unique<Model>("mlp", Shape{1, 8, 8}, 10, /*seed=*/3, device);
  m->add<Flatten>("flatten");
  m->add<Linear>("fc1", LinearOptions{64, 48, true});
  m->add<ReLU>("relu");
  m->add<Dropout>("drop", 0.2f);
  m->add<Linear>("fc2", LinearOptions{48, 10, true});
  m->build();
  return m;
}

// [N, 1, 4, 4] -> flatten -> linear 16 -> 3.
inline std::unique_ptr<Model> tiny_linear_model(Device device, uint64_t seed = 9) {
  auto m = std::make_unique<Model>("mlp", Shape{1, 4, 4}, 3, seed, device);
  m->add<Flatten>("flatten");
  m->add<Linear>("fc", LinearOptions{16, 3, true});
  m->build();
  return m;
}

}  // namespace sdp::nn::testing
