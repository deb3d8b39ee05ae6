#include "train/divergence.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace sdp {

namespace {

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(digits);
  s << v;
  return s.str();
}

}  // namespace

DivergenceGuard::DivergenceGuard(int num_classes, int64_t warmup_steps, int64_t steps_per_epoch,
                                 bool from_start)
    : num_classes_(std::max(num_classes, 2)),
      warmup_steps_(std::max<int64_t>(warmup_steps, 0)),
      // A tenth of an epoch, 10 to 50 steps: long enough to average out batch noise, short
      // enough to speak up early in a long run.
      steps_per_epoch_(std::max<int64_t>(steps_per_epoch, 1)),
      window_(std::clamp<int64_t>(steps_per_epoch / 10, 10, 50)),
      chance_loss_(std::log(static_cast<double>(num_classes_))),
      starting_loss_(from_start ? std::numeric_limits<double>::quiet_NaN()
                                : std::numeric_limits<double>::infinity()) {}

std::optional<std::string> DivergenceGuard::after_step(int64_t steps_done, double loss, double lr) {
  window_sum_ += loss;
  ++window_count_;
  if (steps_done % window_ != 0) return std::nullopt;
  const double mean = window_sum_ / static_cast<double>(window_count_);
  window_sum_ = 0;
  window_count_ = 0;
  if (std::isnan(starting_loss_)) {
    starting_loss_ = mean;
    return std::nullopt;
  }
  // Judged on windows that lie wholly after warm-up and after the first epoch: many healthy
  // runs sit at chance level for a while before they start to learn.
  if (steps_done - window_ < std::max(warmup_steps_, steps_per_epoch_)) return std::nullopt;
  // 98 % of ln(C): a network this close to a uniform guess has learnt next to nothing.
  const double stalled_at = std::min(starting_loss_, 0.98 * chance_loss_);
  if (mean < stalled_at) return std::nullopt;
  const std::string state = mean >= starting_loss_
                                ? "is not below its starting value " + fixed(starting_loss_, 4)
                                : "is at chance level (ln " + std::to_string(num_classes_) + " = " +
                                      fixed(chance_loss_, 4) + ")";
  return verdict(steps_done, lr,
                 "the training loss " + fixed(mean, 4) + " (mean of the last " +
                     std::to_string(window_) + " steps) " + state);
}

std::optional<std::string> DivergenceGuard::after_eval(int64_t steps_done, double test_accuracy,
                                                       double lr) {
  if (steps_done < warmup_steps_) return std::nullopt;
  // A dead network predicts one class: accuracy = that class's share, about 1 / C.
  const double chance = 1.0 / num_classes_;
  if (test_accuracy > 1.2 * chance) return std::nullopt;
  return verdict(steps_done, lr,
                 "the test accuracy " + fixed(100 * test_accuracy, 2) + "% is at chance level (" +
                     fixed(100 * chance, 2) + "% for " + std::to_string(num_classes_) +
                     " classes)");
}

std::optional<std::string> DivergenceGuard::verdict(int64_t steps_done, double lr,
                                                    const std::string& what) {
  if (reported_) return std::nullopt;
  reported_ = true;
  std::ostringstream lr_text;
  lr_text << lr;
  return "step " + std::to_string(steps_done) + ", lr " + lr_text.str() + ": " + what +
         ": the run has diverged or stalled. Likely fix: a lower optimizer.lr, a longer warm-up "
         "(optimizer.warmup_epochs), optimizer.lr_scaling: sqrt, or a large-batch optimizer "
         "(lars, lamb) when the global batch is large";
}

}  // namespace sdp
