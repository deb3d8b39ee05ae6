// LossScaler: amp-fp16's dynamic loss scale (train/loss_scaler.hpp).
#include <gtest/gtest.h>

#include <stdexcept>

#include "train/loss_scaler.hpp"

namespace sdp {
namespace {

TEST(LossScaler, DisabledKeepsScaleOneAndExplainsNoOverflow) {
  LossScaler s(/*enabled=*/false);
  EXPECT_EQ(s.scale(), 1.0f);
  EXPECT_FALSE(s.back_off());  // the caller's non-finite policy decides
  for (int i = 0; i < 5000; ++i) s.step_applied();
  EXPECT_EQ(s.scale(), 1.0f);
}

TEST(LossScaler, StartsAtTwoToTheSixteenAndHalvesOnOverflow) {
  LossScaler s(true);
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_TRUE(s.back_off());
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_TRUE(s.back_off());
  EXPECT_EQ(s.scale(), 16384.0f);
}

TEST(LossScaler, GrowsAfterAnIntervalOfCleanStepsAndAnOverflowRestartsTheCount) {
  LossScalerOptions o;
  o.initial_scale = 1024.0f;
  o.growth_interval = 3;
  LossScaler s(true, o);
  s.step_applied();
  s.step_applied();
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_EQ(s.good_steps(), 2);
  EXPECT_TRUE(s.back_off());  // the count starts over
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_EQ(s.good_steps(), 0);
  s.step_applied();
  s.step_applied();
  EXPECT_EQ(s.scale(), 512.0f);
  s.step_applied();
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_EQ(s.good_steps(), 0);
}

TEST(LossScaler, AnOverflowAtScaleOneIsNotTheScalersToExplain) {
  LossScalerOptions o;
  o.initial_scale = 2.0f;
  LossScaler s(true, o);
  EXPECT_TRUE(s.back_off());
  EXPECT_EQ(s.scale(), 1.0f);
  EXPECT_FALSE(s.back_off());  // a real non-finite gradient: on_nonfinite decides
  EXPECT_EQ(s.scale(), 1.0f);
}

TEST(LossScaler, NeverGrowsPastTheFloatRange) {
  LossScalerOptions o;
  o.initial_scale = 2e38f;  // doubled: past FLT_MAX (3.4e38)
  o.growth_interval = 1;
  LossScaler s(true, o);
  s.step_applied();
  EXPECT_EQ(s.scale(), 2e38f);
}

TEST(LossScaler, RestoresCheckpointStateAndRejectsNonsense) {
  LossScaler s(true);
  s.restore(128.0f, 17);
  EXPECT_EQ(s.scale(), 128.0f);
  EXPECT_EQ(s.good_steps(), 17);
  EXPECT_THROW(s.restore(0.5f, 0), std::invalid_argument);
  EXPECT_THROW(s.restore(8.0f, -1), std::invalid_argument);
  LossScaler off(false);
  off.restore(128.0f, 3);  // an fp32/bf16 run ignores a saved scale
  EXPECT_EQ(off.scale(), 1.0f);
}

TEST(LossScaler, RejectsOptionsThatCannotWork) {
  LossScalerOptions o;
  o.backoff_factor = 1.0f;
  EXPECT_THROW(LossScaler(true, o), std::invalid_argument);
  o = {};
  o.growth_interval = 0;
  EXPECT_THROW(LossScaler(true, o), std::invalid_argument);
}

}  // namespace
}  // namespace sdp
