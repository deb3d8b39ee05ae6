// LrSchedule: the learning rate of every global step, as a pure function of the step.
//
//   peak = base_lr * scaling.multiplier(global_batch / reference_batch)
//   step < warmup_steps:  base_lr + (peak - base_lr) * step / warmup_steps
//                         (gradual warm-up from the reference batch's LR, Goyal et al. 2017)
//   then constant: peak
//        step:     peak * gamma^(number of milestones m with step >= m * steps_per_epoch)
//        cosine:   min_lr + (peak - min_lr) * (1 + cos(pi * s / S)) / 2,
//                  s = step - warmup_steps, S = total_steps - warmup_steps, s clamped to S
//        linear:   min_lr + (peak - min_lr) * (1 - s / S)   (same s and S; the decay that
//                  suits short budgets best in Li et al. 2020, "Budgeted training")
//
// Being a function of the global step alone, a resumed job recomputes the same LR;
// after a resume with another global batch (world size, accumulate_steps), peak (and so the
// LR) is re-derived by the same rule.
#pragma once

#include <cstdint>
#include <vector>

#include "config/choices.hpp"
#include "config/lr_scaling.hpp"

namespace sdp {

struct LrScheduleOptions {
  using Kind = ScheduleKind;
  double base_lr = 0.01;  // for a global batch of reference_batch samples
  LrScaling scaling;
  int64_t global_batch = 1;     // samples per optimizer step, over all ranks and micro-batches
  int64_t reference_batch = 1;  // the global batch base_lr is right for
  int64_t warmup_steps = 0;
  Kind kind = Kind::kConstant;
  std::vector<int64_t> milestones;  // kStep: epochs
  double gamma = 0.1;               // kStep
  double min_lr = 0.0;              // kCosine, kLinear: floor reached at total_steps
  int64_t steps_per_epoch = 1;
  int64_t total_steps = 0;  // kCosine, kLinear: required
};

// The peak LR of the rule above: base_lr x scaling.multiplier(global_batch / reference_batch).
double scaled_lr(double base_lr, const LrScaling& scaling, int64_t global_batch,
                 int64_t reference_batch);

class LrSchedule {
 public:
  // Throws InputError on inconsistent options (e.g. cosine without total_steps).
  explicit LrSchedule(const LrScheduleOptions& options);

  double lr_at(int64_t step) const;
  double peak_lr() const { return peak_; }
  const LrScheduleOptions& options() const { return options_; }

 private:
  LrScheduleOptions options_;
  double peak_;
};

}  // namespace sdp
