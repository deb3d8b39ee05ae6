// StepLog: the training run's metric lines on rank 0 (obs/metrics.hpp) — the [start] line
// with the plan's numbers, a [step] line every train.log_every steps averaging the window
// since the last one, an [epoch] line per evaluation and the [done] summary — and, on a
// terminal (output.progress), the live progress bar between them (obs/progress.hpp).
#pragma once

#include <cstdint>

#include "config/job_spec.hpp"
#include "distributed/world.hpp"
#include "obs/metrics.hpp"
#include "obs/progress.hpp"
#include "optim/lr_schedule.hpp"
#include "train/evaluation.hpp"

namespace sdp {

struct TrainResult;

class StepLog {
 public:
  StepLog(const JobSpec& spec, const World& world);

  // A resumed run: metrics.jsonl continues after the records of the runs before.
  void continue_metrics() { metrics_.continue_file(); }
  void start(const LrSchedule& schedule, int64_t steps_per_epoch, int64_t total_steps,
             int64_t parameters);
  // One finished step: its loss (mean over the ranks), wall time and exposed communication.
  void record_step(double loss, double seconds, double exposed_comm_seconds);
  // Emits the [step] line when `step` (1-based count of steps done) is due. `data_wait_seconds`:
  // this rank's wait for the loader since the run started (its data_wait_ms is the window's share).
  void maybe_emit(int64_t step, int64_t epoch, double lr, int64_t total_steps, double data_wait_seconds);
  // Redraws the progress bar (throttled; nothing when there is none). `epoch` 0-based.
  void progress(int64_t step, int64_t epoch, int64_t epochs, int64_t total_steps);
  void eval(int64_t epoch, int64_t step, const EvalResult& result);
  void done(const TrainResult& result, bool evaluated_last);

  int64_t global_batch() const { return global_batch_; }

 private:
  const JobSpec& spec_;
  const World& world_;
  MetricsLog metrics_;
  ProgressBar bar_;
  EtaEstimator eta_;
  double last_loss_ = 0;
  bool have_loss_ = false;
  int64_t global_batch_;
  int64_t window_steps_ = 0, window_loss_steps_ = 0;
  double window_loss_ = 0, window_seconds_ = 0, window_exposed_comm_ = 0;
  double data_wait_at_last_line_ = 0;
};

}  // namespace sdp
