// DivergenceGuard: notices the two ways a run fails without a non-finite loss — it exploded
// (the training loss climbs back to where it started) or it stalled at chance level (the
// network predicts no better than guessing: loss near ln(num_classes), test accuracy near
// 1 / num_classes) — and says so with the step, the LR and the likely fix, instead of
// finishing with a silent 11 % model.
//
// It reads only values every rank has bit for bit (the loss mean from the step's allreduce,
// the test accuracy from evaluation's), so every rank reaches the same verdict at the same
// step and train.on_divergence: abort ends all of them together. Nothing is judged during
// warm-up, when a high LR is expected to shake the loss, nor the loss in the first epoch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sdp {

class DivergenceGuard {
 public:
  // `warmup_steps`: steps of the LR warm-up; `steps_per_epoch` sizes the loss window.
  // `from_start`: false for a resumed run, whose first window is not the run's start: the
  // loss is then judged against chance level only.
  DivergenceGuard(int num_classes, int64_t warmup_steps, int64_t steps_per_epoch,
                  bool from_start = true);

  // After step `steps_done` (1-based) with its agreed mean loss (finite) and LR. Returns the
  // diagnosis the first time the run is judged diverged or stalled, nothing otherwise.
  std::optional<std::string> after_step(int64_t steps_done, double loss, double lr);
  // After an evaluation at `steps_done` steps.
  std::optional<std::string> after_eval(int64_t steps_done, double test_accuracy, double lr);

  int64_t window() const { return window_; }
  // The mean loss of the first window of steps; NaN until that window is full.
  double starting_loss() const { return starting_loss_; }

 private:
  std::optional<std::string> verdict(int64_t steps_done, double lr, const std::string& what);

  int num_classes_;
  int64_t warmup_steps_;
  int64_t steps_per_epoch_;
  int64_t window_;
  double chance_loss_;  // ln(num_classes): the cross-entropy of a uniform guess
  double starting_loss_;
  double window_sum_ = 0;
  int64_t window_count_ = 0;
  bool reported_ = false;
};

}  // namespace sdp
