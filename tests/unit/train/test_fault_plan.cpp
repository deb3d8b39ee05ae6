// The e2e tests' fault hooks: read from the environment once, for one rank.
#include "train/fault_plan.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

namespace sdp {
namespace {

void clear_hooks() {
  for (const char* v : {"SDP_TEST_STALL_RANK", "SDP_TEST_STALL_STEP", "SDP_TEST_NAN_RANK", "SDP_TEST_NAN_STEP",
                        "SDP_TEST_OVERFLOW_RANK", "SDP_TEST_OVERFLOW_STEP"})
    unsetenv(v);
}

TEST(FaultPlan, NothingFiresWithoutTheVariables) {
  clear_hooks();
  const FaultPlan plan = FaultPlan::from_environment(0);
  for (int64_t step : {0, 1, 5}) {
    EXPECT_FALSE(plan.stalls_at(step));
    EXPECT_FALSE(plan.nan_input_at(step));
    EXPECT_FALSE(plan.loss_overflow_at(step));
  }
}

TEST(FaultPlan, StallFiresOnItsRankAtItsStepOrAnyStep) {
  clear_hooks();
  setenv("SDP_TEST_STALL_RANK", "1", 1);
  EXPECT_TRUE(FaultPlan::from_environment(1).stalls_at(3));  // no step: any step
  EXPECT_FALSE(FaultPlan::from_environment(0).stalls_at(3));
  setenv("SDP_TEST_STALL_STEP", "4", 1);
  EXPECT_FALSE(FaultPlan::from_environment(1).stalls_at(3));
  EXPECT_TRUE(FaultPlan::from_environment(1).stalls_at(4));
  clear_hooks();
}

TEST(FaultPlan, TheEnvironmentIsReadOnceAtTheStart) {
  clear_hooks();
  setenv("SDP_TEST_NAN_RANK", "0", 1);
  setenv("SDP_TEST_NAN_STEP", "5", 1);
  const FaultPlan plan = FaultPlan::from_environment(0);
  clear_hooks();  // later changes are not seen
  EXPECT_TRUE(plan.nan_input_at(5));
  EXPECT_FALSE(plan.nan_input_at(4));
  EXPECT_FALSE(plan.loss_overflow_at(5));
}

TEST(FaultPlan, NanAndOverflowNeedAStep) {
  clear_hooks();
  setenv("SDP_TEST_NAN_RANK", "0", 1);
  setenv("SDP_TEST_OVERFLOW_RANK", "0", 1);
  const FaultPlan without_steps = FaultPlan::from_environment(0);
  EXPECT_FALSE(without_steps.nan_input_at(0));
  EXPECT_FALSE(without_steps.loss_overflow_at(0));
  setenv("SDP_TEST_OVERFLOW_STEP", "2", 1);
  EXPECT_TRUE(FaultPlan::from_environment(0).loss_overflow_at(2));
  EXPECT_FALSE(FaultPlan::from_environment(1).loss_overflow_at(2));
  clear_hooks();
}

}  // namespace
}  // namespace sdp
