#include <gtest/gtest.h>

#include <cmath>

#include "config/choices.hpp"
#include "core/error.hpp"
#include "optim/lr_schedule.hpp"

namespace sdp {
namespace {

TEST(LrScaling, Policies) {
  EXPECT_DOUBLE_EQ(LrScaling::none().scaled(0.1, 8), 0.1);
  EXPECT_DOUBLE_EQ(LrScaling::linear().scaled(0.1, 8), 0.8);
  EXPECT_DOUBLE_EQ(LrScaling::sqrt().scaled(0.1, 16), 0.4);
  EXPECT_DOUBLE_EQ(LrScaling::explicit_factor(1.5).scaled(0.1, 8), 0.15);
  EXPECT_DOUBLE_EQ(LrScaling::linear().scaled(0.1, 1), 0.1);
  EXPECT_EQ(parse_lr_scaling("sqrt").kind, LrScaling::Kind::kSqrt);
  EXPECT_THROW(parse_lr_scaling("quadratic"), InputError);
  EXPECT_EQ(parse_lr_scaling("1.5").kind, LrScaling::Kind::kFactor);
  EXPECT_DOUBLE_EQ(parse_lr_scaling("1.5").multiplier(8), 1.5);
  EXPECT_THROW(parse_lr_scaling("-2"), InputError);
  EXPECT_EQ(LrScaling::explicit_factor(1.5).str(), "factor 1.5");
}

LrScheduleOptions base_options() {
  LrScheduleOptions o;
  o.base_lr = 0.1;
  o.scaling = LrScaling::linear();
  o.global_batch = 8 * 64;  // 8 ranks x 64 at a reference of 64: peak 0.8
  o.reference_batch = 64;
  o.steps_per_epoch = 100;
  o.total_steps = 1000;
  return o;
}

TEST(LrSchedule, WarmupRampsFromTheOneRankLrToTheScaledLr) {
  LrScheduleOptions o = base_options();
  o.warmup_steps = 200;
  LrSchedule s(o);
  EXPECT_DOUBLE_EQ(s.peak_lr(), 0.8);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.1);     // Goyal et al.: start at the 1-rank LR
  EXPECT_DOUBLE_EQ(s.lr_at(100), 0.45);  // linear: half way
  EXPECT_DOUBLE_EQ(s.lr_at(199), 0.1 + 0.7 * 199 / 200);
  EXPECT_DOUBLE_EQ(s.lr_at(200), 0.8);  // end of warm-up: the scaled LR
  EXPECT_DOUBLE_EQ(s.lr_at(999), 0.8);  // constant afterwards
}

TEST(LrSchedule, StepMilestonesInEpochs) {
  LrScheduleOptions o = base_options();
  o.kind = LrScheduleOptions::Kind::kStep;
  o.milestones = {3, 6};
  o.gamma = 0.1;
  LrSchedule s(o);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.8);
  EXPECT_DOUBLE_EQ(s.lr_at(299), 0.8);
  EXPECT_NEAR(s.lr_at(300), 0.08, 1e-15);
  EXPECT_NEAR(s.lr_at(599), 0.08, 1e-15);
  EXPECT_NEAR(s.lr_at(600), 0.008, 1e-15);
}

TEST(LrSchedule, CosineAfterWarmup) {
  LrScheduleOptions o = base_options();
  o.kind = LrScheduleOptions::Kind::kCosine;
  o.warmup_steps = 200;
  LrSchedule s(o);
  EXPECT_DOUBLE_EQ(s.lr_at(200), 0.8);     // starts at the peak
  EXPECT_NEAR(s.lr_at(600), 0.4, 1e-12);   // midpoint of the 800 cosine steps
  EXPECT_NEAR(s.lr_at(1000), 0.0, 1e-12);  // reaches 0 at total_steps
  EXPECT_NEAR(s.lr_at(5000), 0.0, 1e-12);  // and stays there
  EXPECT_NEAR(s.lr_at(400), 0.4 * (1 + std::cos(M_PI / 4)), 1e-12);
  o.min_lr = 0.01;
  LrSchedule floor(o);
  EXPECT_NEAR(floor.lr_at(1000), 0.01, 1e-12);
  EXPECT_NEAR(floor.lr_at(600), 0.405, 1e-12);
}

TEST(LrSchedule, LinearDecayAfterWarmup) {
  LrScheduleOptions o = base_options();
  o.kind = LrScheduleOptions::Kind::kLinear;
  o.warmup_steps = 200;
  LrSchedule s(o);
  EXPECT_DOUBLE_EQ(s.lr_at(200), 0.8);     // starts at the peak
  EXPECT_NEAR(s.lr_at(400), 0.6, 1e-12);   // a quarter of the 800 decay steps
  EXPECT_NEAR(s.lr_at(600), 0.4, 1e-12);
  EXPECT_NEAR(s.lr_at(1000), 0.0, 1e-12);  // reaches 0 at total_steps
  EXPECT_NEAR(s.lr_at(5000), 0.0, 1e-12);  // and stays there
  o.min_lr = 0.01;
  LrSchedule floor(o);
  EXPECT_NEAR(floor.lr_at(1000), 0.01, 1e-12);
  EXPECT_NEAR(floor.lr_at(600), 0.405, 1e-12);
  o.total_steps = 0;
  EXPECT_THROW(LrSchedule{o}, InputError);
}

TEST(LrSchedule, SqrtAndNoneScalingWarmup) {
  LrScheduleOptions o = base_options();
  o.global_batch = 4 * 64;
  o.warmup_steps = 10;
  o.scaling = LrScaling::sqrt();
  EXPECT_DOUBLE_EQ(LrSchedule(o).lr_at(10), 0.2);
  EXPECT_DOUBLE_EQ(LrSchedule(o).lr_at(5), 0.15);
  o.scaling = LrScaling::none();
  EXPECT_DOUBLE_EQ(LrSchedule(o).lr_at(0), 0.1);  // nothing to ramp to
  EXPECT_DOUBLE_EQ(LrSchedule(o).lr_at(5), 0.1);
}

TEST(LrSchedule, ScalesByGlobalOverReferenceBatch) {
  // Goyal et al.: 0.1 x global / 256; ResNet-50 at 8k: 3.2, warm-up from 0.1.
  LrScheduleOptions o = base_options();
  o.global_batch = 8192;
  o.reference_batch = 256;
  o.warmup_steps = 100;
  LrSchedule s(o);
  EXPECT_DOUBLE_EQ(s.peak_lr(), 3.2);
  EXPECT_DOUBLE_EQ(s.lr_at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.lr_at(50), 1.65);
  // A global batch below the reference lowers the LR; sqrt of 1/4 halves it.
  o.global_batch = 64;
  EXPECT_DOUBLE_EQ(LrSchedule(o).peak_lr(), 0.025);
  o.scaling = LrScaling::sqrt();
  EXPECT_DOUBLE_EQ(LrSchedule(o).peak_lr(), 0.05);
  o.scaling = LrScaling::explicit_factor(1.5);  // a factor ignores the batches
  EXPECT_DOUBLE_EQ(LrSchedule(o).peak_lr(), 0.15);
  EXPECT_DOUBLE_EQ(scaled_lr(0.1, LrScaling::linear(), 512, 256), 0.2);
}

TEST(LrSchedule, RejectsInconsistentOptions) {
  LrScheduleOptions o = base_options();
  o.kind = LrScheduleOptions::Kind::kCosine;
  o.total_steps = 0;
  EXPECT_THROW(LrSchedule{o}, InputError);
  o = base_options();
  o.reference_batch = 0;
  EXPECT_THROW(LrSchedule{o}, InputError);
  EXPECT_EQ(parse_choice<ScheduleKind>("cosine"), LrScheduleOptions::Kind::kCosine);
  EXPECT_EQ(parse_choice<ScheduleKind>("linear"), LrScheduleOptions::Kind::kLinear);
  EXPECT_THROW(parse_choice<ScheduleKind>("exponential"), InputError);
}

}  // namespace
}  // namespace sdp
