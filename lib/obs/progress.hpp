// Rank 0's live progress bar on a terminal (docs/guides/first-job.md, "Progress bar and timeline"):
//
//   epoch 2/3 [##########------] 180/384 loss 0.4321  5123 img/s  ETA 0:42
//
// redrawn in place (\r, then erase to the end of the line) at most every min_interval_s,
// and erased before any other line is printed (core/log.hpp's status-line eraser), so the
// metric lines and log lines stay whole and never share a line with the bar. Where the
// output is not a terminal (a log file, CloudWatch under SageMaker) nothing is drawn and
// the plain metric lines are the whole output (output.progress: auto).
//
// The formatting and the ETA are pure functions so they are unit-tested apart from the
// terminal.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "config/choices.hpp"

namespace sdp {

struct ProgressState {
  int64_t epoch = 1;  // 1-based, as in the metric lines
  int64_t epochs = 1;
  int64_t step = 0;  // steps done (1-based count)
  int64_t total_steps = 0;
  double loss = std::numeric_limits<double>::quiet_NaN();  // latest; NaN: none (skipped update)
  double images_per_sec = 0;                               // global; 0: not known yet
  double eta_seconds = -1;                                 // < 0: not known yet
};

// "0:05", "2:03", "1:02:03"; "--:--" when negative or not finite.
std::string format_duration(double seconds);

// The bar line, no longer than `width` columns (the bar shrinks first, then the extras go).
std::string format_progress(const ProgressState& state, int width);

// Time left from the recent pace: an exponential moving average of the step times (so the
// slow first steps and a change of pace fade out) times the steps left. Evaluation and
// checkpoints are not steps and do not count.
class EtaEstimator {
 public:
  explicit EtaEstimator(double smoothing = 0.1) : smoothing_(smoothing) {}
  void add_step(double seconds);
  double seconds_per_step() const { return mean_; }  // < 0 before the first step
  double eta(int64_t steps_left) const;              // < 0 before the first step
 private:
  double smoothing_;
  double mean_ = -1;
};

// output.progress: auto draws only when stdout is a terminal. Under Open MPI every rank's
// stdout is a pseudo-terminal even when mpirun writes to a file, so there it is mpirun's
// own stdout (the parent process's) that must be a terminal.
bool stdout_is_terminal();
bool progress_bar_wanted(ProgressMode mode, bool is_rank0);

class ProgressBar {
 public:
  // Disabled: every call does nothing. `out` is stdout in the product (the metric lines'
  // stream, so the bar and the lines are ordered); tests pass a file and a width.
  explicit ProgressBar(bool enabled, std::FILE* out = stdout, double min_interval_s = 0.2,
                       int width = 0);
  ~ProgressBar();  // erases the bar (an error message must not follow it on its line)
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  bool enabled() const { return enabled_; }
  // Draws when the bar is not on screen (a line erased it), at the last step, or when
  // min_interval_s has passed since the last draw; otherwise returns at once.
  void update(const ProgressState& state);
  // Erases the bar for good (the run ends; [done] follows).
  void finish();
  int64_t draws() const { return draws_; }

 private:
  void erase_locked();  // with core/log.hpp's terminal_lock() held
  int columns() const;

  bool enabled_;
  std::FILE* out_;
  std::chrono::steady_clock::duration min_interval_;
  int width_;
  bool visible_ = false;  // guarded by terminal_lock()
  std::chrono::steady_clock::time_point last_draw_{};
  int64_t draws_ = 0;
};

}  // namespace sdp
