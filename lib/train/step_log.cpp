#include "train/step_log.hpp"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "config/sagemaker_env.hpp"
#include "train/global_batch.hpp"
#include "train/trainer.hpp"

namespace sdp {

StepLog::StepLog(const JobSpec& spec, const World& world)
    : spec_(spec),
      world_(world),
      metrics_(world.rank() == 0, spec.output.metrics, tensorboard_directory(spec.output)),
      bar_(progress_bar_wanted(spec.output.progress, world.rank() == 0)),
      global_batch_(sdp::global_batch(spec, world.size()).size()) {}

void StepLog::start(const LrSchedule& schedule, int64_t steps_per_epoch, int64_t total_steps,
                    int64_t parameters) {
  metrics_.emit("start", "start",
                {{"world_size", world_.size()},
                 {"batch_per_rank", spec_.data.batch_size},
                 {"accumulate_steps", spec_.train.accumulate_steps},
                 {"global_batch", static_cast<double>(global_batch_)},
                 {"reference_batch", static_cast<double>(reference_batch(spec_))},
                 {"base_lr", spec_.optimizer.lr},
                 {"peak_lr", schedule.peak_lr()},
                 {"steps_per_epoch", static_cast<double>(steps_per_epoch)},
                 {"total_steps", static_cast<double>(total_steps)},
                 {"parameters", static_cast<double>(parameters)}},
                {{"lr_scaling", to_string(spec_.optimizer.lr_scaling)}});
}

void StepLog::record_step(double loss, double seconds, double exposed_comm_seconds) {
  if (std::isfinite(loss)) {  // a skipped update (on_nonfinite: skip) has no loss to average
    window_loss_ += loss;
    ++window_loss_steps_;
  }
  window_seconds_ += seconds;
  window_exposed_comm_ += exposed_comm_seconds;
  ++window_steps_;
  if (!bar_.enabled()) return;
  eta_.add_step(seconds);
  if (std::isfinite(loss)) {
    last_loss_ = loss;
    have_loss_ = true;
  }
}

void StepLog::progress(int64_t step, int64_t epoch, int64_t epochs, int64_t total_steps) {
  if (!bar_.enabled()) return;
  ProgressState state;
  state.epoch = epoch + 1;
  state.epochs = epochs;
  state.step = step;
  state.total_steps = total_steps;
  // The window's mean (what the next [step] line will print), else the last known loss.
  if (window_loss_steps_ > 0)
    state.loss = window_loss_ / window_loss_steps_;
  else if (have_loss_)
    state.loss = last_loss_;
  if (eta_.seconds_per_step() > 0)
    state.images_per_sec = static_cast<double>(global_batch_) / eta_.seconds_per_step();
  state.eta_seconds = eta_.eta(total_steps - step);
  bar_.update(state);
}

void StepLog::maybe_emit(int64_t step, int64_t epoch, double lr, int64_t total_steps, double data_wait_seconds) {
  if (window_steps_ == 0 || (step % spec_.train.log_every != 0 && step != total_steps)) return;
  std::vector<std::pair<std::string, double>> values = {
      {"epoch", static_cast<double>(epoch + 1)},
      {"step", static_cast<double>(step)},
      {"lr", lr},
      {"images_per_sec", static_cast<double>(window_steps_ * global_batch_) / window_seconds_},
      // Per step, on rank 0: ~0 when the loader keeps up (the window's steps exclude it).
      {"data_wait_ms", 1e3 * (data_wait_seconds - data_wait_at_last_line_) / window_steps_}};
  data_wait_at_last_line_ = data_wait_seconds;
  // A window of skipped updates only (on_nonfinite: skip) has no loss: the key is left out.
  if (window_loss_steps_ > 0)
    values.insert(values.begin() + 2, {"train_loss", window_loss_ / window_loss_steps_});
  if (world_.size() > 1)
    values.push_back({"exposed_comm_ms", 1e3 * window_exposed_comm_ / window_steps_});
  metrics_.emit("train", "step " + std::to_string(step), values);
  window_steps_ = window_loss_steps_ = 0;
  window_loss_ = window_seconds_ = window_exposed_comm_ = 0;
}

void StepLog::eval(int64_t epoch, int64_t step, const EvalResult& result) {
  metrics_.emit("eval", "epoch " + std::to_string(epoch + 1),
                {{"epoch", static_cast<double>(epoch + 1)},
                 {"step", static_cast<double>(step)},
                 {"test_loss", result.loss},
                 {"test_accuracy", result.accuracy}});
}

void StepLog::done(const TrainResult& result, bool evaluated_last) {
  bar_.finish();
  std::vector<std::pair<std::string, double>> summary = {
      {"steps", static_cast<double>(result.steps)},
      {"train_seconds", result.train_seconds},
      {"images_per_sec", result.images_per_sec},
      // The share of the step loop (steps and the waits between them) spent waiting for data:
      // ~0 when the loader keeps up.
      {"data_wait_percent", result.train_seconds + result.data_wait_seconds > 0
                                ? 100.0 * result.data_wait_seconds / (result.train_seconds + result.data_wait_seconds)
                                : 0.0}};
  if (spec_.train.on_nonfinite == OnNonfinite::kSkip)
    summary.push_back({"skipped_steps", static_cast<double>(result.skipped_steps)});
  if (spec_.precision == Precision::kAmpFp16)
    summary.push_back({"overflow_skips", static_cast<double>(result.overflow_skips)});
  // data.decode: gpu: the training images the GPU decoder refused, decoded on the CPU (rank 0's).
  if (result.decoded_on_gpu)
    summary.push_back({"cpu_decoded_images", static_cast<double>(result.cpu_decoded_samples)});
  // train.cuda_graphs: the steps replayed from a recording (rank 0's); the others ran as launches.
  if (result.gpu_memory_peak_bytes > 0 && spec_.train.cuda_graphs != "off")
    summary.push_back({"graph_replayed_steps", static_cast<double>(result.graph_replayed_steps)});
  if (evaluated_last) summary.push_back({"test_accuracy", result.test_accuracy});
  if (result.gpu_memory_peak_bytes > 0)
    summary.push_back({"gpu_memory_peak_mb", static_cast<double>(result.gpu_memory_peak_bytes) / (1 << 20)});
  metrics_.emit("done", "done", summary);
}

}  // namespace sdp
