// optimizer.capturable (optim/capturable_update.hpp): a GPU update decided and applied on the
// device gives the launched update's bits, for every optimizer, launched or replayed from one
// CUDA graph while the learning rate and the bias corrections change every step; and a step
// whose gradients or loss are not finite changes nothing, as the host's skip does.
// The GPU tests skip without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/device_info.hpp"
#include "core/device_memory.hpp"
#include "core/stream.hpp"
#include "optim/adam.hpp"
#include "optim/capturable_update.hpp"
#include "optim/lamb.hpp"
#include "optim/lars.hpp"
#include "optim/sgd.hpp"

namespace sdp {
namespace {

struct Replica {
  ParameterStore store;
  std::shared_ptr<Stream> stream;
  std::unique_ptr<Optimizer> optimizer;
  Replica(Device device, const std::function<std::unique_ptr<Optimizer>(ParameterStore&)>& make) {
    store.add_parameter("conv.weight", {3 * 16 * 9}, true);
    store.add_parameter("bn.weight", {16}, false);
    store.add_parameter("big.weight", {70001}, true);
    store.add_parameter("fc.bias", {1}, false);
    store.finalize(device);
    stream = make_stream(device);
    optimizer = make(store);
    optimizer->set_stream(stream.get());
  }
  void upload(const Tensor& arena, const std::vector<float>& values) {
    stream->synchronize();
    copy_bytes(store.device(), arena.raw(), Device::cpu(), values.data(), values.size() * sizeof(float));
  }
  static std::vector<float> host(const Tensor& t) {
    std::vector<float> out(static_cast<std::size_t>(t.numel()));
    copy_bytes(Device::cpu(), out.data(), t.device(), t.raw(), out.size() * sizeof(float));
    return out;
  }
  // The parameters, then every state arena: what a bitwise comparison compares.
  std::vector<float> everything() {
    stream->synchronize();
    std::vector<float> all = host(store.param_arena());
    for (const NamedTensor& state : optimizer->state_arenas()) {
      const std::vector<float> s = host(state.tensor);
      all.insert(all.end(), s.begin(), s.end());
    }
    return all;
  }
};

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(ParameterStore&)>;

std::vector<std::pair<std::string, MakeOptimizer>> every_optimizer() {
  SgdOptions momentum;
  momentum.momentum = 0.9f;
  momentum.weight_decay = 5e-4f;
  momentum.decay_all = false;
  SgdOptions nesterov = momentum;
  nesterov.nesterov = true;
  AdamOptions adam;
  adam.weight_decay = 1e-2f;
  AdamOptions adamw = adam;
  adamw.decoupled = true;
  LarsOptions lars;
  lars.momentum = 0.9f;
  lars.weight_decay = 5e-4f;
  LambOptions lamb;
  lamb.weight_decay = 1e-2f;
  return {{"sgd", [](ParameterStore& s) { return Sgd::create(s, SgdOptions{}); }},
          {"sgd momentum", [=](ParameterStore& s) { return Sgd::create(s, momentum); }},
          {"sgd nesterov", [=](ParameterStore& s) { return Sgd::create(s, nesterov); }},
          {"adam", [=](ParameterStore& s) { return Adam::create(s, adam); }},
          {"adamw", [=](ParameterStore& s) { return Adam::create(s, adamw); }},
          {"lars", [=](ParameterStore& s) { return Lars::create(s, lars); }},
          {"lamb", [=](ParameterStore& s) { return Lamb::create(s, lamb); }}};
}

bool have_gpu() { return cuda_backend_built() && cuda_device_count() > 0; }

std::vector<float> random_values(int64_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

// The loss's sum over its rows, in device memory, as the loss layer leaves it.
struct DeviceLossSum {
  std::shared_ptr<void> memory = allocate(Device::cuda(0), sizeof(double));
  void set(double sum) { copy_bytes(Device::cuda(0), memory.get(), Device::cpu(), &sum, sizeof(sum)); }
  const double* get() const { return static_cast<const double*>(memory.get()); }
};

// Two GPU replicas of one optimizer from the same random values: `launched` takes the host's
// update, `captured` the device's.
struct Replicas {
  Replica launched, captured;
  Replicas(const MakeOptimizer& make, uint32_t seed)
      : launched(Device::cuda(0), make), captured(Device::cuda(0), make) {
    const std::vector<float> initial = random_values(count(), 0.5f, seed);
    launched.upload(launched.store.param_arena(), initial);
    captured.upload(captured.store.param_arena(), initial);
  }
  int64_t count() const { return launched.store.param_arena().numel(); }
};

TEST(CapturableUpdate, RefusesAnUpdateOnTheHost) {
  ParameterStore store;
  store.add_parameter("w", {4}, true);
  store.finalize(Device::cpu());
  auto sgd = Sgd::create(store, SgdOptions{});
  EXPECT_THROW(CapturableUpdate(*sgd, host_stream()), std::logic_error);
  EXPECT_THROW(sgd->read_scalars_from_device(nullptr, nullptr), std::logic_error);
}

// Steps 1 and 2 launch the update; step 3 records it into a graph, which steps 3 to 6 replay,
// each with its own learning rate (and Adam's and LAMB's bias corrections, SGD's first step
// past): every step's parameters and state equal the launched host-decided update's bit for
// bit. The capturable side takes its gradients scaled by 4 and unscales them (exact).
TEST(CapturableUpdateOnGpu, ReplaysTheLaunchedUpdateBitwiseForEveryOptimizer) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (const auto& [name, make] : every_optimizer()) {
    SCOPED_TRACE(name);
    Replicas replicas(make, 3);
    Replica &launched = replicas.launched, &captured = replicas.captured;
    const int64_t n = replicas.count();
    CapturableUpdate update(*captured.optimizer, *captured.stream);
    DeviceLossSum loss;
    loss.set(12.5);
    std::unique_ptr<StreamGraph> graph;
    for (int step = 1; step <= 6; ++step) {
      std::vector<float> grads = random_values(n, 0.05f, 100 + step);
      launched.upload(launched.store.grad_arena(), grads);
      for (float& g : grads) g *= 4.0f;
      captured.upload(captured.store.grad_arena(), grads);
      const float lr = 0.01f * static_cast<float>(step) + 0.003f;
      launched.optimizer->step(lr);
      update.stage(lr);
      if (step < 3) {
        update.queue(captured.store.grad_arena(), 4.0f, loss.get(), 5);
      } else {
        if (!graph) {
          captured.stream->begin_capture();
          update.queue(captured.store.grad_arena(), 4.0f, loss.get(), 5);
          graph = captured.stream->end_capture();
        }
        graph->replay();
      }
      update.queue_read();
      ASSERT_TRUE(update.applied()) << "step " << step;
      EXPECT_EQ(captured.optimizer->step_count(), launched.optimizer->step_count());
      ASSERT_EQ(captured.everything(), launched.everything()) << "step " << step;
    }
  }
}

// A NaN gradient, then an infinite loss: nothing changes on the device (weights, momentum,
// moments), the update is not counted, and the next finite step is update t + 1 as on the host,
// where the skipped steps never reached the optimizer.
TEST(CapturableUpdateOnGpu, SkipsOnTheDeviceWhenAGradientOrTheLossIsNotFinite) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (const auto& [name, make] : every_optimizer()) {
    SCOPED_TRACE(name);
    Replicas replicas(make, 4);
    Replica &launched = replicas.launched, &captured = replicas.captured;
    const int64_t n = replicas.count();
    CapturableUpdate update(*captured.optimizer, *captured.stream);
    DeviceLossSum loss;
    const double kNan = std::numeric_limits<double>::quiet_NaN();
    const double kInf = std::numeric_limits<double>::infinity();
    struct Step {
      double loss_sum;
      bool nan_gradient;
      bool applied;
    };
    const Step steps[] = {{3.0, false, true}, {3.0, true, false}, {kInf, false, false},
                          {kNan, false, false}, {3.0, false, true}};
    int index = 0;
    for (const Step& s : steps) {
      ++index;
      std::vector<float> grads = random_values(n, 0.05f, 200 + index);
      if (s.nan_gradient) grads[static_cast<std::size_t>(n / 2)] = std::nanf("");
      captured.upload(captured.store.grad_arena(), grads);
      loss.set(s.loss_sum);
      const std::vector<float> before = captured.everything();
      update.stage(0.02f);
      update.queue(captured.store.grad_arena(), 1.0f, loss.get(), 4);
      update.queue_read();
      EXPECT_EQ(update.applied(), s.applied) << "step " << index;
      if (s.applied) {
        launched.upload(launched.store.grad_arena(), grads);
        launched.optimizer->step(0.02f);
        EXPECT_EQ(captured.everything(), launched.everything()) << "step " << index;
      } else {
        EXPECT_EQ(captured.everything(), before) << "a skipped step changed the device's values, step " << index;
      }
      EXPECT_EQ(captured.optimizer->step_count(), launched.optimizer->step_count()) << "step " << index;
    }
    EXPECT_EQ(captured.optimizer->step_count(), 2);
  }
}

}  // namespace
}  // namespace sdp
