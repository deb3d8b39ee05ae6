#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "core/parameter_store.hpp"
#include "train/gradient_accumulator.hpp"

namespace sdp {
namespace {

// What backward does to one parameter: overwrite its gradient, then report it.
void write(Param& p, float value, float step) {
  float* g = p.grad.data<float>();
  for (int64_t i = 0; i < p.grad.numel(); ++i) g[i] = value + step * static_cast<float>(i);
}

TEST(GradientAccumulator, TheLastMicroBatchLeavesTheMeanAndSaysSo) {
  ParameterStore store;
  store.add_parameter("w", {3, 5});
  store.add_parameter("b", {5}, false);
  store.finalize();
  for (int steps : {2, 3, 4}) {
    GradientAccumulator acc(store, steps);
    for (int repeat = 0; repeat < 2; ++repeat) {  // a second step starts afresh
      std::vector<float> sum_w(15, 0.f), sum_b(5, 0.f);
      for (int m = 0; m < steps; ++m) {
        acc.begin_micro_batch(m);
        // Reverse registration order, as backward reports them.
        Param& b = store.params()[1];
        Param& w = store.params()[0];
        write(b, 0.5f * static_cast<float>(m + repeat), 1.f);
        write(w, -1.f + static_cast<float>(m), 0.25f);
        for (int i = 0; i < 5; ++i) sum_b[i] += b.grad.data<float>()[i];
        for (int i = 0; i < 15; ++i) sum_w[i] += w.grad.data<float>()[i];
        const bool last = m == steps - 1;
        EXPECT_EQ(acc.add(b), last);
        EXPECT_EQ(acc.add(w), last);
      }
      acc.check_complete();
      for (int i = 0; i < 5; ++i)
        EXPECT_FLOAT_EQ(store.params()[1].grad.data<float>()[i], sum_b[i] / steps)
            << steps << " " << i;
      for (int i = 0; i < 15; ++i)
        EXPECT_FLOAT_EQ(store.params()[0].grad.data<float>()[i], sum_w[i] / steps)
            << steps << " " << i;
    }
  }
}

TEST(GradientAccumulator, TwoMicroBatchesAverageLikeTwoRanksBitForBit) {
  ParameterStore store;
  store.add_parameter("w", {64});
  store.finalize();
  Param& p = store.params()[0];
  GradientAccumulator acc(store, 2);
  std::vector<float> g0(64), g1(64);
  for (int i = 0; i < 64; ++i) {
    g0[i] = 1.0f / static_cast<float>(3 + i);
    g1[i] = -0.7f * static_cast<float>(i) / 11.0f;
  }
  acc.begin_micro_batch(0);
  std::copy(g0.begin(), g0.end(), p.grad.data<float>());
  acc.add(p);
  acc.begin_micro_batch(1);
  std::copy(g1.begin(), g1.end(), p.grad.data<float>());
  acc.add(p);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(p.grad.data<float>()[i], (g0[i] + g1[i]) * 0.5f) << i;
}

TEST(GradientAccumulator, AParameterThatNeverReportedIsALogicError) {
  ParameterStore store;
  store.add_parameter("w", {4});
  store.add_parameter("b", {4});
  store.finalize();
  GradientAccumulator acc(store, 2);
  acc.begin_micro_batch(0);
  acc.add(store.params()[1]);
  acc.add(store.params()[0]);
  acc.begin_micro_batch(1);
  acc.add(store.params()[1]);
  EXPECT_THROW(acc.check_complete(), std::logic_error);
  EXPECT_THROW(acc.begin_micro_batch(2), std::logic_error);
  EXPECT_THROW(GradientAccumulator(store, 1), std::logic_error);
}

}  // namespace
}  // namespace sdp
