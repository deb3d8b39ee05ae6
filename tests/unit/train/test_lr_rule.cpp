// The LR of every optimizer step of a job equals the rule of train/global_batch.hpp, computed
// here independently: peak = lr x scaling(batch_size x ranks x accumulate_steps / reference),
// a linear warm-up from lr to peak, then the schedule's decay from peak.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "config/job_spec.hpp"
#include "train/global_batch.hpp"
#include "train/training_setup.hpp"

namespace sdp {
namespace {

struct Rule {
  int ranks, accumulate;
  int64_t reference;  // 0 = unset
  LrScaling scaling;
  ScheduleKind schedule;
  double warmup_epochs;
};

std::string name(const Rule& r) {
  return std::to_string(r.ranks) + " ranks x " + std::to_string(r.accumulate) + ", reference " +
         std::to_string(r.reference) + ", " + r.scaling.str() + ", " + to_string(r.schedule) +
         ", warm-up " + std::to_string(r.warmup_epochs);
}

JobSpec spec_of(const Rule& r) {
  JobSpec spec;
  spec.data.batch_size = 64;
  spec.train.accumulate_steps = r.accumulate;
  spec.optimizer.lr = 0.05;
  spec.optimizer.reference_batch = r.reference;
  spec.optimizer.lr_scaling = r.scaling;
  spec.optimizer.schedule = r.schedule;
  spec.optimizer.milestones = {2, 4};
  spec.optimizer.gamma = 0.1;
  spec.optimizer.min_lr = 0.001;
  spec.optimizer.warmup_epochs = r.warmup_epochs;
  return spec;
}

// The rule, written out from the documentation (docs/job-spec.md, docs/guides/first-job.md).
double expected_peak(const Rule& r) {
  const double global = 64.0 * r.ranks * r.accumulate;
  const double reference = r.reference > 0 ? static_cast<double>(r.reference) : 64.0;
  double multiplier = 1.0;
  if (r.scaling.kind == LrScaling::Kind::kLinear) multiplier = global / reference;
  if (r.scaling.kind == LrScaling::Kind::kSqrt) multiplier = std::sqrt(global / reference);
  if (r.scaling.kind == LrScaling::Kind::kFactor) multiplier = r.scaling.factor;
  return 0.05 * multiplier;
}

double expected_lr(const Rule& r, int64_t step, int64_t steps_per_epoch, int64_t total_steps) {
  const double lr = 0.05, min_lr = 0.001;
  const double peak = expected_peak(r);
  const int64_t warmup = std::llround(r.warmup_epochs * steps_per_epoch);
  if (step < warmup)
    return lr + (peak - lr) * static_cast<double>(step) / static_cast<double>(warmup);
  switch (r.schedule) {
    case ScheduleKind::kConstant:
      return peak;
    case ScheduleKind::kStep:
      return peak * std::pow(0.1, (step >= 2 * steps_per_epoch) + (step >= 4 * steps_per_epoch));
    case ScheduleKind::kCosine: {
      const double span = static_cast<double>(total_steps - warmup);
      const double s = std::min(static_cast<double>(step - warmup), span);
      return min_lr + (peak - min_lr) * 0.5 * (1.0 + std::cos(M_PI * s / span));
    }
    case ScheduleKind::kLinear: {
      const double span = static_cast<double>(total_steps - warmup);
      const double s = std::min(static_cast<double>(step - warmup), span);
      return min_lr + (peak - min_lr) * (span - s) / span;
    }
  }
  return NAN;
}

TEST(LrRule, EveryStepFollowsTheRuleForEveryWorldSizeAndAccumulation) {
  const int64_t steps_per_epoch = 12, total_steps = 72;
  int checked = 0;
  for (int ranks : {1, 2, 3, 8})
    for (int accumulate : {1, 2, 4})
      for (int64_t reference : {int64_t{0}, int64_t{256}, int64_t{100}})
        for (LrScaling scaling : {LrScaling::linear(), LrScaling::sqrt(), LrScaling::none(),
                                  LrScaling::explicit_factor(1.5)})
          for (ScheduleKind schedule :
               {ScheduleKind::kConstant, ScheduleKind::kStep, ScheduleKind::kCosine, ScheduleKind::kLinear})
            for (double warmup_epochs : {0.0, 1.5}) {
              const Rule rule{ranks, accumulate, reference, scaling, schedule, warmup_epochs};
              const JobSpec spec = spec_of(rule);
              const LrSchedule s = make_schedule(spec, ranks, steps_per_epoch, total_steps);
              EXPECT_NEAR(s.peak_lr(), expected_peak(rule), 1e-12) << name(rule);
              EXPECT_EQ(s.peak_lr(), peak_lr(spec, ranks)) << name(rule);
              for (int64_t step = 0; step < total_steps + 5; ++step) {
                const double want = expected_lr(rule, step, steps_per_epoch, total_steps);
                ASSERT_NEAR(s.lr_at(step), want, 1e-12 * std::max(1.0, std::fabs(want)))
                    << name(rule) << ", step " << step;
                ++checked;
              }
            }
  EXPECT_EQ(checked, 4 * 3 * 3 * 4 * 4 * 2 * 77);
}

TEST(LrRule, UnsetReferenceScalesByWorldSizeAsBeforeAndTimesAccumulation) {
  for (int ranks : {1, 2, 4, 8, 16}) {
    JobSpec spec = spec_of({ranks, 1, 0, LrScaling::linear(), ScheduleKind::kConstant, 0});
    // Bitwise what the world-size rule gave before reference_batch existed.
    EXPECT_EQ(peak_lr(spec, ranks), LrScaling::linear().scaled(0.05, ranks));
    spec.optimizer.lr_scaling = LrScaling::sqrt();
    EXPECT_EQ(peak_lr(spec, ranks), LrScaling::sqrt().scaled(0.05, ranks));
  }
  // 2 ranks x 4 micro-batches and 8 ranks x 1 have the same global batch: the same LR at
  // every step.
  const JobSpec a = spec_of({2, 4, 0, LrScaling::linear(), ScheduleKind::kCosine, 1});
  const JobSpec b = spec_of({8, 1, 0, LrScaling::linear(), ScheduleKind::kCosine, 1});
  const LrSchedule sa = make_schedule(a, 2, 117, 585), sb = make_schedule(b, 8, 117, 585);
  for (int64_t step = 0; step < 585; ++step) ASSERT_EQ(sa.lr_at(step), sb.lr_at(step)) << step;
}

TEST(LrRule, WarmupInStepsEqualsTheSameWarmupInEpochs) {
  // 1.5 epochs of 12 steps = 18 steps: the two spellings give the same LR at every step.
  JobSpec in_epochs = spec_of({8, 2, 256, LrScaling::linear(), ScheduleKind::kCosine, 1.5});
  JobSpec in_steps = in_epochs;
  in_steps.optimizer.warmup_epochs = 0;
  in_steps.optimizer.warmup_steps = 18;
  const LrSchedule a = make_schedule(in_epochs, 8, 12, 72), b = make_schedule(in_steps, 8, 12, 72);
  EXPECT_EQ(b.options().warmup_steps, 18);
  for (int64_t step = 0; step < 80; ++step) ASSERT_EQ(a.lr_at(step), b.lr_at(step)) << step;
  EXPECT_DOUBLE_EQ(b.lr_at(0), 0.05);  // from the reference batch's LR
  EXPECT_DOUBLE_EQ(b.lr_at(18), 0.05 * 1024 / 256);
}

TEST(LrRule, DescribedAsGlobalBatchReferenceAndPeak) {
  JobSpec spec = spec_of({8, 1, 256, LrScaling::linear(), ScheduleKind::kConstant, 0});
  EXPECT_EQ(global_batch(spec, 8).size(), 512);
  EXPECT_EQ(describe_lr_rule(spec, 8),
            "global batch 512 (64 x 8 ranks x 1), lr 0.05 @ 256 -> 0.1 (linear)");
  spec = spec_of({1, 4, 0, LrScaling::sqrt(), ScheduleKind::kConstant, 0});
  EXPECT_EQ(describe_lr_rule(spec, 1),
            "global batch 256 (64 x 1 rank x 4), lr 0.05 @ 64 -> 0.1 (sqrt)");
}

}  // namespace
}  // namespace sdp
