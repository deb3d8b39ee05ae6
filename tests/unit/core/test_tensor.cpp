#include <gtest/gtest.h>

#include "core/parameter_store.hpp"
#include "core/tensor.hpp"

namespace sdp {
namespace {

TEST(Tensor, AllocatesZeroedAlignedStorage) {
  Tensor t({3, 5});
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(t.nbytes(), 60u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(t.data<float>()[i], 0.0f);
}

TEST(Tensor, SliceAndReshapeShareStorage) {
  Tensor t({4, 4});
  Tensor row = t.slice(4, 4);
  row.fill(2.0f);
  EXPECT_EQ(t.data<float>()[3], 0.0f);
  EXPECT_EQ(t.data<float>()[4], 2.0f);
  EXPECT_EQ(t.data<float>()[7], 2.0f);
  EXPECT_EQ(t.data<float>()[8], 0.0f);
  EXPECT_THROW(t.reshaped({5, 3}), std::invalid_argument);
  EXPECT_THROW(t.slice(10, 7), std::out_of_range);
}

TEST(ParameterStore, ParamsAndGradsShareOneLayout) {
  ParameterStore store;
  Param& w = store.add_parameter("fc.weight", {3, 7});
  Param& b = store.add_parameter("fc.bias", {3}, /*weight_decay=*/false);
  store.add_buffer("bn.running_mean", {5});
  store.finalize();
  EXPECT_EQ(store.num_parameters(), 24);
  EXPECT_EQ(w.offset, 0);
  EXPECT_EQ(b.offset % ParameterStore::kAlignElements, 0);
  EXPECT_EQ(w.value.data<float>(), store.param_arena().data<float>());
  EXPECT_EQ(b.grad.data<float>(), store.grad_arena().data<float>() + b.offset);
  EXPECT_FALSE(b.weight_decay);
  EXPECT_THROW(store.add_parameter("late", {1}), std::logic_error);
}

TEST(ParameterStore, GradArenaCanMoveIntoExternalMemory) {
  ParameterStore store;
  Param& w = store.add_parameter("w", {2, 3});
  Param& b = store.add_parameter("b", {3});
  store.finalize();
  w.grad.fill(1.5f);
  auto external = allocate_host(store.grad_arena().nbytes());
  store.rebind_grad_arena(external, external.get());
  EXPECT_EQ(store.grad_arena().raw(), external.get());
  EXPECT_EQ(w.grad.raw(), external.get());
  EXPECT_EQ(b.grad.data<float>(), static_cast<float*>(external.get()) + b.offset);
  EXPECT_EQ(w.grad.data<float>()[5], 1.5f);  // contents carried over
}

TEST(ParameterStore, FingerprintChangesWithShapes) {
  ParameterStore a, b, c;
  a.add_parameter("w", {3, 4});
  b.add_parameter("w", {3, 4});
  c.add_parameter("w", {4, 3});
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  EXPECT_NE(a.fingerprint(), c.fingerprint());
}

}  // namespace
}  // namespace sdp
