// LrSchedule: the learning rate of every global step, as a pure function of the step.
//
//   peak = scaling.scaled(base_lr, world_size)
//   step < warmup_steps:  base_lr + (peak - base_lr) * step / warmup_steps
//                         (gradual warm-up from the 1-rank LR, Goyal et al. 2017)
//   then constant: peak
//        step:     peak * gamma^(number of milestones m with step >= m * steps_per_epoch)
//        cosine:   min_lr + (peak - min_lr) * (1 + cos(pi * s / S)) / 2,
//                  s = step - warmup_steps, S = total_steps - warmup_steps, s clamped to S
//
// Being a function of the global step alone, a resumed job recomputes the same LR;
// after a resume on a different world size, peak (and so the LR) is re-derived.
#pragma once

#include <cstdint>
#include <vector>

#include "config/choices.hpp"
#include "config/lr_scaling.hpp"

namespace sdp {

struct LrScheduleOptions {
  using Kind = ScheduleKind;
  double base_lr = 0.01;  // for ONE rank
  LrScaling scaling;
  int world_size = 1;
  int64_t warmup_steps = 0;
  Kind kind = Kind::kConstant;
  std::vector<int64_t> milestones;  // kStep: epochs
  double gamma = 0.1;               // kStep
  double min_lr = 0.0;              // kCosine: floor reached at total_steps
  int64_t steps_per_epoch = 1;
  int64_t total_steps = 0;  // kCosine: required
};

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
