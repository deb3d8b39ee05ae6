// GradientPlan: buffers whose lifetimes overlap never share memory, buffers whose lifetimes
// do not are packed, and every buffer is bound to its place.
#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <memory>
#include <vector>

#include "nn/gradient_plan.hpp"

namespace sdp::nn {
namespace {

struct Slot {
  GradientPlan::Buffer buffer;
  char* data = nullptr;
  explicit Slot(std::size_t bytes) {
    buffer.bytes = bytes;
    buffer.bind = [this](void* p) { data = static_cast<char*>(p); };
  }
};

bool overlap(const Slot& a, const Slot& b) {
  return a.data < b.data + b.buffer.bytes && b.data < a.data + a.buffer.bytes;
}

TEST(GradientPlan, ChainNeedsTwoBuffers) {
  // layer k reads the gradient layer k+1 wrote and writes its own: a ping-pong.
  std::vector<std::unique_ptr<Slot>> slots;
  GradientPlan plan;
  GradientPlan::Buffer* grad = nullptr;
  for (int k = 0; k < 10; ++k) {
    slots.push_back(std::make_unique<Slot>(1000));
    plan.read(grad);
    grad = plan.write(&slots.back()->buffer);
    plan.next();
  }
  plan.allocate(Device::cpu());
  EXPECT_EQ(plan.buffer_count(), 10u);
  EXPECT_EQ(plan.separate_bytes(), 10000u);
  EXPECT_LE(plan.arena_bytes(), 2 * 1024u);
  for (std::size_t k = 1; k < slots.size(); ++k)
    EXPECT_FALSE(overlap(*slots[k - 1], *slots[k])) << k;
}

TEST(GradientPlan, LaterReadKeepsBufferAlive) {
  // A residual block's d_sum: written first, read by the shortcut and, three operations
  // later, by the branch; nothing written in between may land on it.
  Slot d_sum(512), s1(512), b1(512), b2(512), sum(512);
  GradientPlan plan;
  plan.write(&d_sum.buffer);
  plan.next();
  plan.read(&d_sum.buffer);
  plan.write(&s1.buffer);
  plan.next();
  plan.read(&d_sum.buffer);
  plan.write(&b1.buffer);
  plan.next();
  plan.read(&b1.buffer);
  plan.write(&b2.buffer);
  plan.next();
  plan.read(&b2.buffer);
  plan.read(&s1.buffer);
  plan.write(&sum.buffer);
  plan.next();
  plan.allocate(Device::cpu());
  for (Slot* other : {&s1, &b1}) EXPECT_FALSE(overlap(d_sum, *other));
  for (Slot* other : {&b1, &b2, &sum}) EXPECT_FALSE(overlap(s1, *other));
  EXPECT_FALSE(overlap(b2, sum));
  EXPECT_LT(plan.arena_bytes(), plan.separate_bytes());
}

TEST(GradientPlan, TemporariesOfOneOperationAreDistinct) {
  Slot in(256), tmp1(256), tmp2(256), out(256);
  GradientPlan plan;
  plan.write(&in.buffer);
  plan.next();
  plan.read(&in.buffer);
  plan.write(&tmp1.buffer);
  plan.write(&tmp2.buffer);
  plan.write(&out.buffer);
  plan.next();
  plan.allocate(Device::cpu());
  const std::vector<Slot*> all = {&in, &tmp1, &tmp2, &out};
  for (std::size_t i = 0; i < all.size(); ++i)
    for (std::size_t j = i + 1; j < all.size(); ++j) EXPECT_FALSE(overlap(*all[i], *all[j]));
  for (Slot* s : all) EXPECT_EQ(reinterpret_cast<uintptr_t>(s->data) % 64, 0u);
}

TEST(GradientPlan, ReadOfAnUnwrittenBufferIsAnError) {
  Slot a(64);
  GradientPlan plan;
  EXPECT_THROW(plan.read(&a.buffer), std::logic_error);
  plan.read(nullptr);  // a buffer the plan does not manage
}

TEST(GradientPlan, ClearForgetsBuffers) {
  Slot a(64), b(64);
  GradientPlan plan;
  plan.write(&a.buffer);
  plan.next();
  plan.allocate(Device::cpu());
  plan.clear();
  EXPECT_EQ(plan.arena_bytes(), 0u);
  EXPECT_THROW(plan.read(&a.buffer), std::logic_error);
  plan.write(&b.buffer);
  plan.allocate(Device::cpu());
  EXPECT_EQ(plan.buffer_count(), 1u);
}

// A whole training step as the GPU plans it (model.memory_plan: shared): each layer's output
// written in forward and read by its consumer's and its own backward, the gradients a
// ping-pong in backward, the sizes shrinking stage by stage as a ResNet's do. Every
// activation lives at the start of backward, so the peak is about their sum; the arena must
// come close to that peak (the gradients fit in the activations backward is done with).
TEST(GradientPlan, ForwardAndBackwardPackNearTheLivePeak) {
  std::vector<std::size_t> sizes;
  for (std::size_t stage : {4096u, 2048u, 1024u, 512u})
    for (int layer = 0; layer < 9; ++layer) sizes.push_back(stage * (layer % 3 == 2 ? 4 : 1));
  const std::size_t n = sizes.size();
  std::vector<std::unique_ptr<Slot>> act, grad;
  GradientPlan plan;
  GradientPlan::Buffer* in = nullptr;  // the model's input: its own
  std::vector<GradientPlan::Buffer*> inputs;
  for (std::size_t i = 0; i < n; ++i) {
    act.push_back(std::make_unique<Slot>(sizes[i]));
    plan.read(in);
    inputs.push_back(in);
    in = plan.write(&act.back()->buffer);
    plan.next();
  }
  plan.read(in);  // the loss
  plan.next();
  GradientPlan::Buffer* g = nullptr;  // the loss's gradient: its own
  for (std::size_t i = n; i-- > 0;) {
    plan.read(g);
    plan.read(inputs[i]);
    plan.read(&act[i]->buffer);
    g = nullptr;
    if (i > 0) {
      grad.push_back(std::make_unique<Slot>(sizes[i - 1]));
      g = plan.write(&grad.back()->buffer);
    }
    plan.next();
  }
  plan.allocate(Device::cpu());
  std::size_t activations = 0;
  for (std::size_t s : sizes) activations += s;
  std::cout << "  arena " << plan.arena_bytes() << ", live peak " << plan.peak_live_bytes() << ", activations "
            << activations << ", separate " << plan.separate_bytes() << "\n";
  EXPECT_GE(plan.peak_live_bytes(), activations);
  EXPECT_GE(plan.arena_bytes(), plan.peak_live_bytes());
  EXPECT_LE(static_cast<double>(plan.arena_bytes()), 1.1 * plan.peak_live_bytes());
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) EXPECT_FALSE(overlap(*act[i], *act[j])) << i << " " << j;
}

}  // namespace
}  // namespace sdp::nn
