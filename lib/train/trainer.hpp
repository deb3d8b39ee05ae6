// The training loop (docs/architecture.md, "The training loop"): loads the data, builds the model, makes every rank
// start from rank 0's weights, then runs synchronous steps (forward, backward, gradient
// mean over ranks, optimizer step) with evaluation after epochs, metric lines on rank 0,
// and the final model written by rank 0 to output.model_dir/model.safetensors.
//
// Where things go: the parts are built in training_setup.hpp, gradient averaging is
// DataParallel (data_parallel.hpp), evaluation and buffer averaging evaluation.hpp, metric
// lines step_log.hpp, the final model model_output.hpp. Trainer strings them together, one
// method per phase, so a feature joins at its phase: checkpoint writes and signal checks at
// the step boundary (after_step), resume in start_replicas, a timeline around train_step.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "distributed/communicator.hpp"
#include "distributed/watchdog.hpp"
#include "nn/layer_profile.hpp"
#include "obs/timeline.hpp"
#include "optim/capturable_update.hpp"
#include "train/checkpointing.hpp"
#include "train/data_parallel.hpp"
#include "train/divergence.hpp"
#include "train/fault_plan.hpp"
#include "train/job_setup.hpp"
#include "train/loss_scaler.hpp"
#include "train/step_log.hpp"
#include "train/training_setup.hpp"

namespace sdp {

struct TrainResult {
  int64_t steps = 0;
  double train_seconds = 0;   // step loop only (evaluation excluded)
  double images_per_sec = 0;  // global, over the whole run
  double test_loss = 0;
  double test_accuracy = 0;  // fraction in [0, 1]
  bool interrupted = false;  // stopped by SIGTERM/SIGINT after a checkpoint (exit 0)
  int64_t skipped_steps =
      0;  // updates skipped for a non-finite loss or gradient (on_nonfinite: skip)
  int64_t overflow_skips = 0;  // amp-fp16 updates skipped for overflowing gradients
  double checkpoint_blocked_seconds = 0;  // step loop waiting on rank 0's checkpoint snapshots
  double data_wait_seconds = 0;  // step loop waiting for the loader's next batch (this rank)
  int64_t skipped_samples = 0;   // bad training samples replaced on this rank (data.on_bad_record: skip)
  bool decoded_on_gpu = false;      // nvJPEG decoded the training images (data.decode)
  int64_t cpu_decoded_samples = 0;  // of those, the images the GPU refused, decoded here
  // On a GPU: the most device memory the runner's own allocations held at once (this rank's
  // process; core/device_memory.hpp memory_use). 0 on the CPU.
  std::size_t gpu_memory_peak_bytes = 0;
  int64_t graph_replayed_steps = 0;  // steps replayed from a CUDA graph (train.cuda_graphs), this rank's
};

// Collective. Checks the output locations first (train/output_check.hpp). Bad data or model
// options throw CollectiveFailure (reported once); a non-finite loss stops every rank at the
// same step with RuntimeError.
TrainResult train(JobSetup& setup);

class Trainer {
 public:
  // Set-up (collective): data, model on the assigned device, optimizer, loader, schedule.
  explicit Trainer(JobSetup& setup);
  TrainResult run();

 private:
  TrainResult run_epochs();
  // Agreement before step 0: same steps per epoch, same model; the checkpoint to resume
  // from (if any) restored; rank 0's weights, buffers and optimizer state on every rank.
  void start_replicas();
  void run_epoch(int64_t epoch);
  // forward and backward of each micro-batch (`first`, then the loader's next
  // train.accumulate_steps - 1), gradient mean, update; returns the loss averaged over the
  // micro-batches and the ranks. Also agrees whether any rank was interrupted (stop_agreed_).
  double train_step(const Batch& first, int64_t epoch, double lr);
  // The forward and backward of each micro-batch of the step; the sum of their losses (this
  // rank's), but for the last micro-batch's when the loss is read at the step's end
  // (train.loss_read: step_end): train_step takes that one once the gradients are averaged.
  // Where the last bucket carries the step's agreement, it also hands the step's mean loss
  // and stop request to DataParallel before the last backward (on the CPU the loss is known).
  double forward_backward(const Batch& first);
  // After the gradients are averaged: checks them (and `finite_loss`, agreed by all ranks),
  // then applies the optimizer; false when the update is skipped (on_nonfinite: skip, or an
  // fp16 overflow), an exit-1 error when on_nonfinite: abort.
  bool update(bool finite_loss, int64_t epoch, double lr);
  // A non-finite loss or gradient at this step: what happened, and the exit-1 error that ends
  // every rank under train.on_nonfinite: abort.
  std::string nonfinite_what(bool finite_loss, int64_t epoch, double lr) const;
  [[noreturn]] void throw_nonfinite(bool finite_loss, int64_t epoch, double lr) const;
  // The SDP_TEST_NAN_* fault: a copy of the batch's images with a NaN first element (the
  // loader's batch stays as it was); a GPU model copies it in at forward.
  const Tensor& nan_poisoned(const Tensor& images);
  // Runs a blocking collective under control_watch_ (named `what` in its reports).
  void watched(const char* what, const std::function<void()>& call);
  // The step boundary: metric lines, periodic checkpoints, the agreed stop on a signal.
  void after_step(int64_t epoch, double lr);
  TrainPosition position() const { return {step_, cursor_}; }
  void save_checkpoint(bool wait);
  void evaluate_after_epoch(int64_t epoch);
  void finish();
  // Resumed from a checkpoint at or past this job's last step: nothing to train. Says so, and
  // keeps the final model of the run that wrote the checkpoint when it is in output.model_dir,
  // or makes it now from the checkpoint (evaluated, as a finished run's is).
  void finish_without_training();
  // The next batch from the loader; its wait is the timeline's data_wait (from `since`).
  const Batch* next_batch(std::chrono::steady_clock::time_point since);
  // A GPU model: takes the next micro-batch from the loader now and starts its copy to the
  // device (Model::prefetch), so it overlaps the backward just queued; next_batch hands it out.
  void fetch_ahead();
  // output.timeline (collective): every rank writes its own trace, rank 0 gathers them into
  // the merged file.
  void write_timeline();
  // output.timeline_layers: the step's layer passes onto the timeline's layers track.
  void record_layer_passes();
  // With nvJPEG decoding: a warning, once, when many training images fall back to the CPU
  // decoder (what nvJPEG refuses is decoded one by one on the loader's few threads).
  void warn_if_decoding_falls_back();
  void start_step_graphs();
  // After start_step_graphs: distributed.stream_ordered's buckets and optimizer.capturable's
  // update, each said in the log; the model's step tail (recorded with a whole step) where
  // either is on, and on several ranks the agreement every recording then needs.
  void start_step_tail();
  // The step's device work after backward: the buckets joined (stream-ordered), the update
  // decided and applied on the device (capturable).
  void queue_step_tail();
  bool has_step_tail() const;
  void note_step_graph_failure();
  // model.batchnorm: folded, model.grad_sum: fused: after the first training step (the first
  // configure), what the fusions made of the model.
  void note_fusions();
  // train.conv_algorithms: measured on several GPU ranks: rank 0's algorithms on every rank.
  void share_measured_conv_algorithms();
  // A diagnosis from the DivergenceGuard: a warning on rank 0, or with on_divergence: abort
  // the end of the run on every rank (the guard reads agreed values, so all get here).
  void diverged(const std::string& diagnosis);

  JobSetup& setup_;
  const JobSpec& spec_;
  const World& world_;
  TrainingParts parts_;
  int64_t steps_per_epoch_ = 0, total_steps_ = 0, epochs_ = 0;
  std::unique_ptr<LrSchedule> schedule_;
  std::shared_ptr<Communicator> world_comm_;  // parameter broadcast, buffer averaging
  // output.timeline; null (the usual case): not traced. Declared before parallel_ so it
  // outlives the communication thread that records into it.
  std::unique_ptr<Timeline> timeline_;
  // output.timeline_layers: times every layer pass (the timeline holds its units' names).
  std::unique_ptr<nn::LayerProfile> layer_profile_;
  std::chrono::steady_clock::time_point layers_step_start_{};
  std::unique_ptr<DataParallel> parallel_;
  // optimizer.capturable; null: the host decides the update. After parts_: it refers to the
  // optimizer and ends before it.
  std::unique_ptr<CapturableUpdate> capturable_;
  StepLog log_;
  TrainResult result_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<DivergenceGuard> divergence_;  // made once the first step is known
  LossScaler scaler_;  // precision: amp-fp16's dynamic loss scale (disabled otherwise)
  FaultPlan faults_;   // the e2e tests' SDP_TEST_* faults for this rank, read once
  // Watches every collective outside the gradient buckets (start-up, the per-step loss and
  // stop agreement, checkpoints, evaluation, the timeline); made in start_replicas.
  std::unique_ptr<Watchdog> control_watch_;
  Tensor poisoned_input_;  // nan_poisoned's copy
  bool have_ahead_ = false;        // fetch_ahead() ran and next_batch has not taken it
  const Batch* ahead_ = nullptr;   // its batch (nullptr: the loader had ended)
  int64_t step_ = 0;
  std::optional<ResumePoint> resumed_;  // the checkpoint this run continues, if any
  SampleCursor cursor_;       // the first sample of the next step
  bool stop_agreed_ = false;  // every rank saw a signal flag at the last step's allreduce
  bool loss_at_step_end_ = false;  // train.loss_read (training_setup.hpp reads_loss_at_step_end)
  bool evaluated_last_ = false;
  int64_t images_read_ = 0;        // training images the loader handed this rank in this run
  bool fallback_warned_ = false;
  bool step_graphs_ = false;               // train.cuda_graphs: on, and the model's step can be recorded
  bool fusions_noted_ = false;
  bool step_graph_failure_noted_ = false;  // note_step_graph_failure said it   // warn_if_decoding_falls_back said it
};

}  // namespace sdp
