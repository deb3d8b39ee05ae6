#include "optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace sdp {

double scaled_lr(double base_lr, const LrScaling& scaling, int64_t global_batch,
                 int64_t reference_batch) {
  return scaling.scaled(base_lr,
                        static_cast<double>(global_batch) / static_cast<double>(reference_batch));
}

LrSchedule::LrSchedule(const LrScheduleOptions& options) : options_(options) {
  if (options.global_batch < 1) throw InputError("lr schedule: the global batch must be >= 1");
  if (options.reference_batch < 1)
    throw InputError("lr schedule: the reference batch must be >= 1");
  peak_ =
      scaled_lr(options.base_lr, options.scaling, options.global_batch, options.reference_batch);
  if (options.warmup_steps < 0) throw InputError("lr schedule: warmup steps must be >= 0");
  if (options.steps_per_epoch < 1) throw InputError("lr schedule: steps per epoch must be >= 1");
  if ((options.kind == LrScheduleOptions::Kind::kCosine || options.kind == LrScheduleOptions::Kind::kLinear) &&
      options.total_steps <= 0)
    throw InputError("lr schedule: cosine and linear decay need the total number of steps");
  if (options.kind == LrScheduleOptions::Kind::kStep && !(options.gamma > 0))
    throw InputError("lr schedule: step gamma must be > 0");
}

double LrSchedule::lr_at(int64_t step) const {
  const LrScheduleOptions& o = options_;
  if (step < o.warmup_steps)
    return o.base_lr + (peak_ - o.base_lr) * static_cast<double>(step) / o.warmup_steps;
  switch (o.kind) {
    case LrScheduleOptions::Kind::kConstant:
      return peak_;
    case LrScheduleOptions::Kind::kStep: {
      int passed = 0;
      for (int64_t m : o.milestones)
        if (step >= m * o.steps_per_epoch) ++passed;
      return peak_ * std::pow(o.gamma, passed);
    }
    case LrScheduleOptions::Kind::kCosine:
    case LrScheduleOptions::Kind::kLinear: {
      const int64_t span = std::max<int64_t>(1, o.total_steps - o.warmup_steps);
      const double s = static_cast<double>(std::min(step - o.warmup_steps, span));
      constexpr double kPi = 3.14159265358979323846;
      const double left = o.kind == LrScheduleOptions::Kind::kCosine ? 0.5 * (1.0 + std::cos(kPi * s / span))
                                                                      : 1.0 - s / static_cast<double>(span);
      return o.min_lr + (peak_ - o.min_lr) * left;
    }
  }
  return peak_;
}

}  // namespace sdp
