// Every optimizer's GPU update (cuda_updates.cu) against its CPU twin, from the same values
// and gradients. Both run update_rules.hpp's arithmetic; they may differ in the last bits
// (nvcc contracts a * b + c into FMAs, the norms sum in another order), hence a relative
// tolerance. Skips at run time without a GPU ("no CUDA device") or without the CUDA backend.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/device_info.hpp"
#include "core/device_memory.hpp"
#include "optim/adam.hpp"
#include "optim/lamb.hpp"
#include "optim/lars.hpp"
#include "optim/sgd.hpp"

namespace sdp {
namespace {

// Awkward sizes (a scalar, a tail shorter than a warp, a conv weight longer than one block's
// stride) with and without weight decay, as a ResNet's weights, BatchNorm and biases are.
struct Shape1 {
  const char* name;
  int64_t numel;
  bool weight_decay;
};
const Shape1 kParams[] = {{"conv.weight", 3 * 16 * 9, true}, {"bn.weight", 16, false}, {"bn.bias", 16, false},
                          {"big.weight", 300007, true},     {"fc.bias", 1, false},   {"fc.weight", 7, true}};

struct Replica {
  ParameterStore store;
  explicit Replica(Device device) {
    for (const Shape1& p : kParams) store.add_parameter(p.name, {p.numel}, p.weight_decay);
    store.finalize(device);
  }
  void upload(const Tensor& arena, const std::vector<float>& values) {
    copy_bytes(store.device(), arena.raw(), Device::cpu(), values.data(), values.size() * sizeof(float));
  }
  std::vector<float> params() const {
    std::vector<float> out(store.param_arena().numel());
    copy_bytes(Device::cpu(), out.data(), store.device(), store.param_arena().raw(), out.size() * sizeof(float));
    return out;
  }
};

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(ParameterStore&)>;

void expect_device_matches_cpu(const MakeOptimizer& make, const std::string& what) {
  if (!cuda_backend_built()) GTEST_SKIP() << "built without the CUDA backend";
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  Replica cpu(Device::cpu()), gpu(Device::cuda(0));
  const int64_t n = cpu.store.param_arena().numel();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Values only where parameters are: the padding between them stays zero, as in training.
  auto random_arena = [&](float scale) {
    std::vector<float> a(n, 0.0f);
    for (const Param& p : cpu.store.params())
      for (int64_t i = 0; i < shape_numel(p.shape); ++i) a[p.offset + i] = scale * normal(rng);
    return a;
  };
  const std::vector<float> initial = random_arena(0.5f);
  cpu.upload(cpu.store.param_arena(), initial);
  gpu.upload(gpu.store.param_arena(), initial);
  std::unique_ptr<Optimizer> on_cpu = make(cpu.store), on_gpu = make(gpu.store);
  for (int step = 1; step <= 5; ++step) {
    const std::vector<float> grads = random_arena(0.05f);
    cpu.upload(cpu.store.grad_arena(), grads);
    gpu.upload(gpu.store.grad_arena(), grads);
    const float lr = 0.05f * static_cast<float>(step);
    on_cpu->step(lr);
    on_gpu->step(lr);
    const std::vector<float> want = cpu.params(), got = gpu.params();  // the copy waits for the kernels
    int reported = 0;
    for (int64_t i = 0; i < n && reported < 5; ++i) {
      const float tolerance = 2e-5f * std::fabs(want[i]) + 1e-6f;
      if (!(std::fabs(got[i] - want[i]) <= tolerance)) {
        ADD_FAILURE() << what << " step " << step << " element " << i << ": gpu " << got[i] << ", cpu " << want[i];
        ++reported;
      }
    }
  }
}

TEST(OptimizerOnDevice, SgdPlain) {
  expect_device_matches_cpu([](ParameterStore& s) { return Sgd::create(s, SgdOptions{}); }, "sgd");
}

TEST(OptimizerOnDevice, SgdMomentumDecayOnFlagged) {
  SgdOptions o;
  o.momentum = 0.9f;
  o.dampening = 0.1f;
  o.weight_decay = 5e-4f;
  o.decay_all = false;
  expect_device_matches_cpu([o](ParameterStore& s) { return Sgd::create(s, o); }, "sgd momentum");
}

TEST(OptimizerOnDevice, SgdNesterov) {
  SgdOptions o;
  o.momentum = 0.9f;
  o.nesterov = true;
  o.weight_decay = 1e-4f;
  expect_device_matches_cpu([o](ParameterStore& s) { return Sgd::create(s, o); }, "sgd nesterov");
}

TEST(OptimizerOnDevice, AdamL2) {
  AdamOptions o;
  o.weight_decay = 1e-2f;
  o.decay_all = false;
  expect_device_matches_cpu([o](ParameterStore& s) { return Adam::create(s, o); }, "adam");
}

TEST(OptimizerOnDevice, AdamWDecoupled) {
  AdamOptions o;
  o.weight_decay = 1e-2f;
  o.decoupled = true;
  expect_device_matches_cpu([o](ParameterStore& s) { return Adam::create(s, o); }, "adamw");
}

TEST(OptimizerOnDevice, Lars) {
  LarsOptions o;
  o.momentum = 0.9f;
  o.weight_decay = 5e-4f;
  expect_device_matches_cpu([o](ParameterStore& s) { return Lars::create(s, o); }, "lars");
}

TEST(OptimizerOnDevice, Lamb) {
  LambOptions o;
  o.weight_decay = 1e-2f;
  expect_device_matches_cpu([o](ParameterStore& s) { return Lamb::create(s, o); }, "lamb");
}

// Without a GPU the CUDA store cannot even be made; with one, a second run of the same update
// gives the same bits (the norms sum in a fixed order), which replicas on many ranks rely on.
TEST(OptimizerOnDevice, LambIsDeterministic) {
  if (!cuda_backend_built()) GTEST_SKIP() << "built without the CUDA backend";
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  auto run = [] {
    Replica gpu(Device::cuda(0));
    const int64_t n = gpu.store.param_arena().numel();
    std::vector<float> values(n), grads(n);
    for (int64_t i = 0; i < n; ++i) {
      values[i] = std::sin(0.001f * static_cast<float>(i));
      grads[i] = 0.01f * std::cos(0.003f * static_cast<float>(i));
    }
    gpu.upload(gpu.store.param_arena(), values);
    gpu.upload(gpu.store.grad_arena(), grads);
    LambOptions o;
    o.weight_decay = 1e-2f;
    std::unique_ptr<Lamb> lamb = Lamb::create(gpu.store, o);
    for (int s = 0; s < 3; ++s) lamb->step(0.01f);
    return gpu.params();
  };
  EXPECT_EQ(run(), run());
}

}  // namespace
}  // namespace sdp
