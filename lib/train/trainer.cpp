#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/clock.hpp"
#include "core/device_memory.hpp"
#include "core/error.hpp"
#include "core/floating_point.hpp"
#include "core/log.hpp"
#include "distributed/agreement.hpp"
#include "distributed/collectives.hpp"
#include "distributed/communicator_factory.hpp"
#include "distributed/inter_node.hpp"
#include "distributed/watchdog.hpp"
#include "nn/threads.hpp"
#include "train/evaluation.hpp"
#include "train/interruption.hpp"
#include "train/model_output.hpp"
#include "train/output_check.hpp"
#include "train/plan_command.hpp"

namespace sdp {

namespace {

using Clock = std::chrono::steady_clock;


// The loss scale of the SDP_TEST_OVERFLOW_* fault (train/fault_plan.hpp): what a too-large
// loss scale does, on one rank only (its f16 gradients overflow; the loss stays finite).
constexpr float kTestOverflowScale = 1e30f;

// The share of training images decoded on the CPU, with nvJPEG decoding, from which the log
// says so (a few refused images cost nothing; a data set of progressive files does).
constexpr double kDecodeFallbackWarnShare = 0.2;

}  // namespace

TrainResult train(JobSetup& setup) {
  // From here a signal no longer kills the process: it stops the run at the first step
  // boundary it reaches (one that comes while the data loads stops the run after step 1).
  install_interruption_handlers();
  // Before the data is read: an unwritable output location must not cost a whole run.
  check_output_locations(setup.spec, *setup.world);
  return Trainer(setup).run();
}

Trainer::Trainer(JobSetup& setup)
    : setup_(setup),
      spec_(setup.spec),
      world_(*setup.world),
      log_(setup.spec, *setup.world),
      scaler_(setup.spec.precision == Precision::kAmpFp16),
      faults_(FaultPlan::from_environment(setup.world->rank())) {
  // Before any thread of the job starts: they inherit the pool's size and the float mode.
  nn::set_num_threads(setup.device.threads);
  set_flush_denormals(spec_.numerics.flush_denormals);
  // The rank's device (distributed/device_assignment): its GPU, pinned by local rank, or the CPU.
  parts_ = build_training_parts(spec_, world_, setup.device.device);
  loss_at_step_end_ = reads_loss_at_step_end(spec_, setup.device.device);
  // The optimizer's kernels go on the model's stream, after backward's.
  parts_.optimizer->set_stream(parts_.model->context().stream.get());
  steps_per_epoch_ = parts_.loader->steps_per_epoch();
  total_steps_ = steps_per_epoch_ * spec_.train.epochs;
  if (spec_.train.max_steps > 0 && (total_steps_ == 0 || spec_.train.max_steps < total_steps_))
    total_steps_ = spec_.train.max_steps;
  epochs_ = (total_steps_ + steps_per_epoch_ - 1) / steps_per_epoch_;
  schedule_ = std::make_unique<LrSchedule>(
      make_schedule(spec_, world_.size(), steps_per_epoch_, total_steps_));
  checkpointer_ = std::make_unique<Checkpointer>(spec_, world_, *parts_.model, *parts_.optimizer, &scaler_);
}

void Trainer::watched(const char* what, const std::function<void()>& call) {
  control_watch_->watch(step_, what, call);
}

void Trainer::start_replicas() {
  // Every collective from here on is watched (the gradient buckets by DataParallel's own
  // watchdog): a rank that stops taking part ends the job with a report, never a hang.
  control_watch_ = std::make_unique<Watchdog>(
      WatchdogOptions{spec_.distributed.stall_warning_s, spec_.distributed.timeout_s}, world_.rank(),
      ProgressBoard::create(world_));
  checkpointer_->set_watch(control_watch_.get(), &faults_);
  int differing = -1;
  watched("start-up agreement", [&] {
    differing = first_rank_differing(world_.comm(), static_cast<uint64_t>(steps_per_epoch_));
  });
  if (int r = differing; r >= 0)
    run_on_all_ranks(world_.comm(), [&] {
      throw InputError("rank " + std::to_string(r) +
                       " computed a different number of steps per epoch than "
                       "rank 0 (" +
                       std::to_string(steps_per_epoch_) + "): all ranks must read the same data");
    });
  // Every rank must have built the same model, or the gradient mean mixes unrelated
  // tensors; then all start from rank 0's weights (and buffers).
  ParameterStore& store = parts_.model->store();
  watched("start-up agreement", [&] { differing = first_rank_differing(world_.comm(), store.fingerprint()); });
  if (int r = differing; r >= 0)
    run_on_all_ranks(world_.comm(), [&] {
      throw InputError("rank " + std::to_string(r) +
                       " built a different model than rank 0 "
                       "(parameter names or shapes differ); all ranks must run the same job spec");
    });
  // Model state moves over a Communicator (the gradients' backend), not the control plane.
  CommunicatorOptions options;
  options.device = store.device();
  // Agreed: a backend this rank cannot use (NCCL without a GPU) is one error, printed once.
  watched("communicator set-up", [&] {
    run_on_all_ranks(world_.comm(), [&] {
      world_comm_ = make_communicator(world_backend(spec_.distributed.backend, setup_.inter_node,
                                                    options.device, world_.nodes()),
                                      world_.comm(), options);
    });
  });
  // Resume before the broadcasts below: they carry rank 0's restored weights and buffers.
  if ((resumed_ = checkpointer_->resume(*world_comm_, steps_per_epoch_, *schedule_))) {
    step_ = resumed_->position.step;
    cursor_ = resumed_->position.cursor;
    if (step_ == resumed_->checkpoint_step) checkpointer_->note_on_disk(step_);
    log_.continue_metrics();  // metrics.jsonl goes on after the records of the runs before
  }
  watched("start-up broadcast", [&] {
    world_comm_->broadcast(CommBuffer::of(store.param_arena()), {0})->wait();
    world_comm_->broadcast(CommBuffer::of(store.buffer_arena()), {0})->wait();
  });
  checkpointer_->restore_rank_buffers(*world_comm_);  // each rank's own BatchNorm statistics
  share_measured_conv_algorithms();
  if (!spec_.output.timeline.empty()) {
    // Time 0 of every rank's trace right after a barrier: the ranks' traces line up to within
    // the barrier's skew, even across hosts whose clocks are not comparable.
    watched("timeline barrier", [&] { MPI_Barrier(world_.comm()); });
    timeline_ = std::make_unique<Timeline>(world_.rank(), Clock::now());
    if (spec_.output.timeline_layers) {
      nn::Context& context = parts_.model->context();
      layer_profile_ = std::make_unique<nn::LayerProfile>(*context.stream);
      context.profile = layer_profile_.get();
    }
  }
  // allreduce: auto and bucket_mb: auto with distributed.calibration: the plan's choice,
  // from a few measured steps (docs/guides/plan.md, "Let the job choose at start").
  StartupAllreduce chosen;
  watched("allreduce plan at start", [&] {
    chosen = choose_allreduce_at_start(spec_, world_, setup_.device, parts_.model->input_shape());
  });
  if (world_.rank() == 0 && !chosen.reason.empty()) log_info("plan: " + chosen.reason);
  watched("data-parallel set-up", [&] { run_on_all_ranks(world_.comm(), [&] {
    DistributedSpec distributed = spec_.distributed;
    distributed.compression = resolve_compression(distributed.compression, spec_.precision);
    distributed.inter_node = setup_.inter_node;
    distributed.allreduce = chosen.algorithm;
    distributed.bucket_mb = chosen.bucket_mb;
    parallel_ = std::make_unique<DataParallel>(*parts_.model, distributed, world_,
                                               spec_.train.accumulate_steps, timeline_.get());
  }); });
  if (timeline_) {
    // Room for every event of the run, allocated now: the step path never allocates. Per
    // step: step, gradient wait, optimizer, and data wait, forward, backward per micro-batch;
    // the periodic checkpoints; per epoch a few (evaluation); one allreduce per bucket and step.
    const auto steps = static_cast<std::size_t>(std::max<int64_t>(total_steps_ - step_, 0));
    const auto micro = static_cast<std::size_t>(spec_.train.accumulate_steps);
    const auto capped = [](std::size_t n) { return std::min<std::size_t>(n, kMaxTraceEvents); };
    const std::size_t checkpoints =
        spec_.checkpoint.every_steps > 0
            ? steps / static_cast<std::size_t>(spec_.checkpoint.every_steps)
            : 0;
    timeline_->reserve(TraceTrack::kMain,
                       capped(steps * (4 + 3 * micro) + checkpoints + 16 * (epochs_ + 4)));
    timeline_->reserve(TraceTrack::kComm,
                       capped(steps * static_cast<std::size_t>(parallel_->bucket_count())));
  }
  divergence_ =
      std::make_unique<DivergenceGuard>(spec_.model.num_classes, schedule_->options().warmup_steps,
                                        steps_per_epoch_, /*from_start=*/step_ == 0);
  start_step_graphs();
  start_step_tail();
}

// train.cuda_graphs: on (and auto on a GPU): after data parallel's and the timeline's set-up,
// which decide whether the model's step can be recorded (nn/model.hpp step_graph_obstacle).
void Trainer::start_step_graphs() {
  if (!wants_cuda_graphs(spec_, parts_.model->device())) return;
  nn::Model& model = *parts_.model;
  std::string obstacle = model.step_graph_obstacle();
  if (obstacle.empty() && !loss_at_step_end_) obstacle = kLossReadForwardKeepsStepsLaunched;
  // Where backward hands each gradient on (data parallel, micro-batches), `on` records the
  // forward alone; `auto` keeps such steps launched until a GPU run has checked it.
  const std::string backward_obstacle = model.backward_graph_obstacle();
  const bool forward_alone = !backward_obstacle.empty() && spec_.train.cuda_graphs == "on";
  if (obstacle.empty() && !backward_obstacle.empty() && !forward_alone)
    obstacle = backward_obstacle + "; train.cuda_graphs: on records the forward alone";
  step_graphs_ = obstacle.empty();
  model.set_step_graphs(step_graphs_, forward_alone);
  if (world_.rank() != 0) return;
  const std::string key = "CUDA graphs (train.cuda_graphs: " + spec_.train.cuda_graphs + "): ";
  if (step_graphs_ && forward_alone)
    log_info(key + "each step's forward is recorded at the third step after a new batch shape or an evaluation, "
                   "and replayed from then on; backward runs as launches: " + backward_obstacle);
  else if (step_graphs_)
    log_info(key + "each step's forward and backward are recorded at the third step after a new batch shape or "
                   "an evaluation, and replayed from then on");
  else
    log_info(key + "the steps run as launches: " + obstacle);
}

void Trainer::start_step_tail() {
  nn::Model& model = *parts_.model;
  const bool rank0 = world_.rank() == 0;
  if (spec_.distributed.stream_ordered == "on" && world_.size() > 1 && rank0)
    log_info(parallel_->stream_ordered()
                 ? "Gradient buckets (distributed.stream_ordered: on): started by the training thread as backward "
                   "makes them, ordered on the GPU's streams; the host waits once a step, for its end"
                 : "Gradient buckets (distributed.stream_ordered: on): the communication thread orders them: " +
                       parallel_->stream_order_obstacle());
  // Across ranks the device decides on the averaged gradients alone, which the buckets must
  // have joined on the device first.
  const bool update_on_device = uses_capturable_update(spec_, model.device(), world_.size()) &&
                                (world_.size() == 1 || parallel_->stream_ordered());
  if (update_on_device) capturable_ = std::make_unique<CapturableUpdate>(*parts_.optimizer, *model.context().stream);
  if (spec_.optimizer.capturable == "on" && rank0) {
    std::string how;
    if (update_on_device)
      how = std::string("decided and applied on the device, ") +
            (step_graphs_ ? "recorded with each step" : "launched after backward");
    else if (uses_capturable_update(spec_, model.device(), world_.size()))
      how = "decided on the host: the buckets are not stream-ordered (" + parallel_->stream_order_obstacle() + ")";
    else
      how = describe_update(spec_, model.device(), world_.size());
    log_info("Update (optimizer.capturable: on): " + how);
  }
  if (!has_step_tail() || !step_graphs_) return;
  // In a step graph's recording this follows backward; launched steps queue it the same.
  model.set_step_tail([this] { queue_step_tail(); });
  if (world_.size() == 1 || !parallel_->stream_ordered()) return;
  // A recording that holds collectives is every rank's or none's (NCCL's rule): after each
  // attempt the ranks agree, and a rank whose recording failed midway forgets its buckets.
  model.set_recording_agreement([this](bool recorded) {
    if (!recorded) parallel_->abandon_step();
    double failed = recorded ? 0.0 : 1.0;
    watched("step recording agreement", [&] { allreduce_sum(world_.comm(), &failed, 1); });
    return failed == 0.0;
  });
}

bool Trainer::has_step_tail() const { return capturable_ || parallel_->stream_ordered(); }

void Trainer::queue_step_tail() {
  if (parallel_->stream_ordered()) parallel_->join_on_device();
  // Several ranks: the loss is agreed on the host after the step.
  if (capturable_) queue_capturable_update(*capturable_, *parts_.model, /*with_loss=*/world_.size() == 1);
}

// A recording that failed ends the replays on this rank: said once, with the reason.
// train.conv_algorithms: measured on GPUs, several ranks: every rank computes with the
// algorithms rank 0 timed (or took from the checkpoint), so the averaged gradient's bits do not
// depend on each rank's timing, and a resumed run can take the same ones from the checkpoint.
// Rank 0 configures its model for a training step first (timing what it has not got yet).
void Trainer::share_measured_conv_algorithms() {
  nn::Model& model = *parts_.model;
  if (model.device().is_cpu() || spec_.train.conv_algorithms != "measured" || world_.size() == 1) return;
  std::string measured;
  watched("convolution algorithms at start", [&] {
    run_on_all_ranks(world_.comm(), [&] {
      if (world_.rank() != 0) return;
      model.prepare_training(spec_.data.batch_size);
      measured = model.measured_conv_algorithms();
    });
  });
  watched("convolution algorithms broadcast", [&] { measured = broadcast_string(world_.comm(), measured, 0); });
  if (world_.rank() == 0 || measured.empty()) return;
  const std::string why = model.use_measured_conv_algorithms(measured, "rank 0's convolution algorithms");
  if (!why.empty())
    log_warn("rank " + std::to_string(world_.rank()) + " times its own convolution algorithms, not rank 0's (" + why +
             "): its gradients' bits may differ from what rank 0's algorithms give");
}

void Trainer::note_step_graph_failure() {
  const std::string& failure = parts_.model->step_graph_failure();
  if (failure.empty() || step_graph_failure_noted_) return;
  step_graph_failure_noted_ = true;
  log_warn("rank " + std::to_string(world_.rank()) + ": CUDA graphs: recording step " + std::to_string(step_) +
           " failed (" + failure + "); the steps run as launches from here");
}

// After the first step, what the opt-in fusions made of the model (model.batchnorm: folded,
// model.grad_sum: fused), a warning where a layer refused.
void Trainer::note_fusions() {
  if (fusions_noted_) return;
  fusions_noted_ = true;
  if (world_.rank() != 0) return;
  const nn::Context::BatchNormFolding& folding = parts_.model->batchnorm_folding();
  if (folding.requested) {
    const std::string line = "BatchNorm folding (model.batchnorm: " + spec_.model.batchnorm + "): " + folding.summary();
    if (folding.refused.empty() && folding.refused_with_residual.empty() && folding.refused_shortcuts.empty())
      log_info(line);
    else
      log_warn(line);
  }
  const nn::Context::GradSumFusion& sums = parts_.model->grad_sum_fusion();
  if (sums.requested) {
    const std::string line = "Gradient sums (model.grad_sum: fused): " + sums.summary();
    if (sums.refused.empty())
      log_info(line);
    else
      log_warn(line);
  }
}

TrainResult Trainer::run() {
  // An error every rank met together (CollectiveFailure) unwinds in order. One met by this
  // rank alone (its data, its disk) ends the job here, while the members that hold collective
  // resources are still alive: their destructors would wait for ranks that never come.
  return end_job_on_local_error(world_.comm(), [&] { return run_epochs(); });
}

TrainResult Trainer::run_epochs() {
  start_replicas();
  if (resumed_ && step_ >= total_steps_) {
    finish_without_training();
    write_timeline();
    return result_;
  }
  log_.start(*schedule_, steps_per_epoch_, total_steps_, parts_.model->store().num_parameters());
  for (int64_t epoch = cursor_.epoch; epoch < epochs_; ++epoch) {
    run_epoch(epoch);
    if (stop_agreed_) break;
    evaluate_after_epoch(epoch);
  }
  if (stop_agreed_) {
    // The checkpoint of this step is on disk (after_step); no evaluation, no final model.
    result_.steps = step_;
    result_.interrupted = true;
    result_.checkpoint_blocked_seconds = checkpointer_->blocked_seconds();
    if (world_.rank() == 0)
      log_info(
          "interrupted (SIGTERM or SIGINT on at least one rank): stopped at step " +
          std::to_string(step_) + " with checkpoint " +
          checkpoint_path(spec_.checkpoint.dir, step_) +
          "; every rank exits 0; run the same job again to continue (checkpoint.resume: auto)");
    write_timeline();
    return result_;
  }
  finish();
  write_timeline();
  return result_;
}

void Trainer::run_epoch(int64_t epoch) {
  TrainLoader& loader = *parts_.loader;
  if (cursor_.epoch < epoch)
    cursor_ = SampleCursor{epoch, 0};  // the dropped tail of the last epoch
  const int64_t steps = std::min(loader.steps_left(cursor_), total_steps_ - step_);
  if (steps <= 0) return;
  have_ahead_ = false;  // a batch fetched ahead of a stop belongs to the iteration start() ends
  loader.start(cursor_, steps);
  for (;;) {
    const auto wait_start = timeline_ ? Clock::now() : Clock::time_point{};
    const Batch* batch = next_batch(wait_start);  // the first micro-batch of a step
    if (batch == nullptr) break;
    const auto step_start = Clock::now();
    const double lr = schedule_->lr_at(step_);
    const SampleCursor next_cursor = batch->next_cursor;  // train_step moves the loader on
    if (layer_profile_) {
      layers_step_start_ = Clock::now();
      layer_profile_->begin_step();
    }
    const double loss = train_step(*batch, epoch, lr);    // NaN: a skipped update
    if (layer_profile_) record_layer_passes();
    const double step_seconds = seconds_since(step_start);
    if (timeline_) timeline_->record(TraceTrack::kMain, "step", wait_start, Clock::now(), step_);
    result_.train_seconds += step_seconds;
    log_.record_step(loss, step_seconds, parallel_->exposed_comm_seconds());
    ++step_;
    cursor_ = next_cursor;
    if (std::isfinite(loss))
      if (auto diagnosis = divergence_->after_step(step_, loss, lr)) diverged(*diagnosis);
    after_step(epoch, lr);
    log_.progress(step_, epoch, epochs_, total_steps_);
    if (stop_agreed_) break;
  }
  result_.data_wait_seconds += loader.wait_seconds();  // start() begins each iteration at 0
  result_.skipped_samples = loader.skipped_samples();
  result_.cpu_decoded_samples = loader.cpu_decoded_samples();
  result_.decoded_on_gpu = decodes_on_gpu(spec_, parts_.model->device());
  if (parts_.model->device().is_cuda()) {
    result_.gpu_memory_peak_bytes = memory_use(DeviceKind::kCuda).peak;
    if (world_.rank() == 0)
      log_info("GPU memory at its peak: " + format_megabytes(result_.gpu_memory_peak_bytes) + " allocated by sdp-train (" +
               describe_memory_at_peak(DeviceKind::kCuda) + ")");
  }
  result_.graph_replayed_steps = parts_.model->replayed_steps();
  warn_if_decoding_falls_back();
}

void Trainer::warn_if_decoding_falls_back() {
  if (!result_.decoded_on_gpu || fallback_warned_ || images_read_ == 0) return;
  const double share = static_cast<double>(result_.cpu_decoded_samples) / static_cast<double>(images_read_);
  if (share < kDecodeFallbackWarnShare) return;
  fallback_warned_ = true;
  log_warn("rank " + std::to_string(world_.rank()) + ": " + std::to_string(result_.cpu_decoded_samples) + " of " +
           std::to_string(images_read_) + " training images (" + std::to_string(static_cast<int>(100 * share + 0.5)) +
           " %) were refused by nvJPEG (progressive, CMYK or PNG files) and decoded on the CPU, one by one, on " +
           "the loader's threads; if the loader is slow (data_wait in the log), use data.decode: cpu, or raise " +
           "data.workers");
}

const Batch* Trainer::next_batch(Clock::time_point since) {
  if (have_ahead_) {
    have_ahead_ = false;
    return ahead_;
  }
  const Batch* batch = parts_.loader->next();
  if (batch != nullptr) images_read_ += static_cast<int64_t>(batch->labels.size());
  if (timeline_ && batch != nullptr)
    timeline_->record(TraceTrack::kMain, "data_wait", since, Clock::now(), step_);
  return batch;
}

double Trainer::train_step(const Batch& first, int64_t epoch, double lr) {
  if (faults_.stalls_at(step_)) FaultPlan::stall(world_.rank(), "at step " + std::to_string(step_));
  parallel_->begin_step(step_);
  if (capturable_) capturable_->stage(static_cast<float>(lr));
  double loss = forward_backward(first);
  if (capturable_) capturable_->queue_read();
  {
    // The communication backward did not hide (the comm track shows each bucket).
    TraceScope trace(timeline_.get(), "gradient_wait", step_);
    parallel_->finish_step();  // every gradient averaged over the micro-batches and the ranks
  }
  // Every rank learns whether any rank's loss went bad, so all stop at the same step, and
  // whether any was asked to stop. Where the last bucket carried both (data_parallel.hpp)
  // they are there; otherwise one small allreduce agrees on them.
  double mean_loss = 0;
  if (parallel_->carries_step_agreement()) {
    const DataParallel::StepAgreement agreed = parallel_->step_agreement();
    mean_loss = agreed.mean_loss;
    stop_agreed_ = agreed.stop;
  } else {
    // Read at the step's end, the last forward's loss is long known: no wait for the device.
    if (loss_at_step_end_) loss += parts_.model->take_loss();
    double agreed[2] = {loss / spec_.train.accumulate_steps, interruption_requested() ? 1.0 : 0.0};
    if (world_.size() > 1) watched("loss and stop allreduce", [&] { allreduce_sum(world_.comm(), agreed, 2); });
    mean_loss = agreed[0] / world_.size();
    stop_agreed_ = agreed[1] > 0;
  }
  if (!update(std::isfinite(mean_loss), epoch, lr)) return std::nan("");
  parallel_->check_replicas(step_ + 1);
  return mean_loss;
}

double Trainer::forward_backward(const Batch& first) {
  nn::Model& model = *parts_.model;
  // Dropout masks follow (rank, step); the micro-batches of a step continue that stream.
  model.set_random_position(static_cast<uint64_t>(world_.rank()), step_);
  model.set_loss_scale(scaler_.enabled() && faults_.loss_overflow_at(step_) ? kTestOverflowScale : scaler_.scale());
  // train.accumulate_steps micro-batches: DataParallel sums their gradients and reduces over
  // the ranks during the last one's backward.
  const int micro_batches = spec_.train.accumulate_steps;
  double loss = 0;
  const Batch* batch = &first;
  for (int micro = 0; micro < micro_batches; ++micro) {
    if (micro > 0 &&
        (batch = next_batch(timeline_ ? Clock::now() : Clock::time_point{})) == nullptr)
      throw std::logic_error("the loader ended in the middle of step " + std::to_string(step_));
    parallel_->begin_micro_batch(micro);
    const bool poison = micro == 0 && faults_.nan_input_at(step_);
    const Tensor& images = poison ? nan_poisoned(batch->images) : batch->images;
    if (step_graphs_) {
      // One replayed graph (train.cuda_graphs), or the two passes as launches until recorded.
      TraceScope trace(timeline_.get(), "forward_backward", step_);
      model.forward_backward_deferred(images, batch->labels.data());
      note_step_graph_failure();
    } else {
      {
        TraceScope trace(timeline_.get(), "forward", step_);
        if (loss_at_step_end_)
          model.forward_deferred(images, batch->labels.data());
        else
          loss += model.forward(images, batch->labels.data(), /*training=*/true);
      }
      if (micro + 1 == micro_batches && parallel_->carries_step_agreement()) {
        // The step's agreement rides in the last bucket, which leaves during this backward:
        // the loss goes in now (a host job's: computed already, no wait).
        if (loss_at_step_end_) loss += model.take_loss();
        parallel_->set_step_agreement(loss / micro_batches, interruption_requested());
      }
      TraceScope trace(timeline_.get(), "backward", step_);
      model.backward();
      if (has_step_tail()) queue_step_tail();
    }
    if (!model.device().is_cpu()) {
      // Once the batch just used is on the device (its forward waited for its loss, or
      // wait_input_copied waits for the copy alone), the loader may have its memory back.
      if (loss_at_step_end_) model.wait_input_copied();
      fetch_ahead();
    }
    // The next micro-batch's forward replaces this one's loss: take it now (its forward is
    // done or nearly; backward is queued behind it). The last one's waits for the step's end.
    if (loss_at_step_end_ && micro + 1 < micro_batches) loss += model.take_loss();
  }
  note_fusions();
  return loss;
}

bool Trainer::update(bool finite_loss, int64_t epoch, double lr) {
  // The gradients too: a NaN input can leave the loss finite (ReLU maps NaN to 0) and still
  // poison the weights, after which the network is dead at a finite loss. The averaged
  // gradients are the same on every rank, so each checks its own copy and all agree. When a
  // bad gradient ends the run anyway (on_nonfinite: abort, no loss scaler) and the update runs
  // on the CPU, the check rides in the optimizer's pass instead of a pass of its own.
  nn::Model& model = *parts_.model;
  Stream* stream = model.context().stream.get();
  Tensor grads = model.store().grad_arena();  // shares the arena's storage
  const bool check_in_update = model.device().is_cpu() && !scaler_.enabled() &&
                               spec_.train.on_nonfinite == OnNonfinite::kAbort;
  // optimizer.capturable: the device has checked the gradients (and, on one rank, this loss)
  // and updated or not; its decision arrives with the step's end.
  const bool finite_gradients =
      capturable_ ? capturable_->applied() : check_in_update || grads.all_finite(stream);
  if (capturable_ && finite_gradients && !finite_loss) {
    // Several ranks: the device decided on the averaged gradients alone, which were finite,
    // and applied the update; a rank's loss was not.
    if (spec_.train.on_nonfinite != OnNonfinite::kSkip) throw_nonfinite(finite_loss, epoch, lr);
    if (world_.rank() == 0)
      log_warn(nonfinite_what(finite_loss, epoch, lr) + " on some rank, while every averaged gradient is: the "
               "device applied the update (optimizer.capturable decides on the gradients across ranks)");
    scaler_.step_applied();
    return true;
  }
  if (!finite_loss || !finite_gradients) {
    // fp16 gradients overflowed at this loss scale: every rank skips (the averaged gradients
    // are the same bits everywhere) and backs off; not a fault of the run.
    if (finite_loss && scaler_.back_off()) {
      ++result_.overflow_skips;
      if (world_.rank() == 0)
        log_info("step " + std::to_string(step_) + ": the f16 gradients overflowed; the update is skipped on " +
                 "every rank and the loss scale backs off to " + std::to_string(scaler_.scale()) +
                 " (precision: amp-fp16)");
      return false;
    }
    if (spec_.train.on_nonfinite != OnNonfinite::kSkip) throw_nonfinite(finite_loss, epoch, lr);
    ++result_.skipped_steps;
    if (world_.rank() == 0)
      log_warn(nonfinite_what(finite_loss, epoch, lr) + ": the update is skipped on every rank (train.on_nonfinite: skip; " +
               std::to_string(result_.skipped_steps) + " skipped so far)");
    return false;
  }
  if (capturable_) {  // applied on the device, and counted by applied()
    scaler_.step_applied();
    return true;
  }
  TraceScope trace(timeline_.get(), "optimizer", step_);
  if (model.loss_scale() != 1.0f) grads.scale(1.0f / model.loss_scale(), stream);  // exact: a power of two
  if (!check_in_update)
    parts_.optimizer->step(static_cast<float>(lr));
  else if (!parts_.optimizer->step_checking_gradients(static_cast<float>(lr)))
    throw_nonfinite(/*finite_loss=*/true, epoch, lr);  // the weights are poisoned: the run ends here
  scaler_.step_applied();
  return true;
}

std::string Trainer::nonfinite_what(bool finite_loss, int64_t epoch, double lr) const {
  return "step " + std::to_string(step_) + " (epoch " + std::to_string(epoch) + "): the training " +
         (finite_loss ? "loss is finite but a gradient is not" : "loss is not finite") + " (lr " + std::to_string(lr) +
         ")";
}

void Trainer::throw_nonfinite(bool finite_loss, int64_t epoch, double lr) const {
  throw CollectiveFailure(ExitCode::kRuntime,
                          nonfinite_what(finite_loss, epoch, lr) +
                              "; lower optimizer.lr or add warm-up (or train.on_nonfinite: skip)",
                          world_.rank() == 0);
}

const Tensor& Trainer::nan_poisoned(const Tensor& images) {
  poisoned_input_ = Tensor(images.shape(), images.dtype(), images.device());
  poisoned_input_.copy_from(images);
  if (images.dtype() == DType::kF32)
    poisoned_input_.data<float>()[0] = std::nanf("");
  else  // a 16-bit batch (data.batch_type: compute): a quiet NaN's bits
    poisoned_input_.data<uint16_t>()[0] = images.dtype() == DType::kF16 ? 0x7e00 : 0x7fc0;
  return poisoned_input_;
}

void Trainer::fetch_ahead() {
  ahead_ = next_batch(timeline_ ? Clock::now() : Clock::time_point{});
  have_ahead_ = true;
  if (ahead_ != nullptr) parts_.model->prefetch(ahead_->images);
}

void Trainer::after_step(int64_t epoch, double lr) {
  // The loader's wait restarts at each epoch's start(); run_epoch adds it up at the epoch's end.
  log_.maybe_emit(step_, epoch, lr, total_steps_, result_.data_wait_seconds + parts_.loader->wait_seconds());
  if (stop_agreed_) {
    save_checkpoint(/*wait=*/true);  // the process ends next: the file must be on disk
    return;
  }
  // The last step's checkpoint is written by finish(), after waiting for this one.
  const int64_t every = spec_.checkpoint.every_steps;
  if (every > 0 && step_ % every == 0 && step_ < total_steps_) save_checkpoint(/*wait=*/false);
}

void Trainer::save_checkpoint(bool wait) {
  // Agreed, so that rank 0's failure to write (now, or the previous background write) ends
  // every rank together with its message instead of an abort.
  TraceScope trace(timeline_.get(), "checkpoint", step_);
  const double blocked_before = checkpointer_->blocked_seconds();
  watched("checkpoint agreement", [&] {
    run_on_all_ranks(world_.comm(), [&] {
      checkpointer_->save(position(), *schedule_, steps_per_epoch_, total_steps_, wait, *world_comm_);
    });
  });
  if (world_.rank() == 0)
    log_info("checkpoint at step " + std::to_string(step_) + ": " +
             checkpoint_path(spec_.checkpoint.dir, step_) +
             (wait ? " written" : " being written in the background") + "; the step loop waited " +
             std::to_string((checkpointer_->blocked_seconds() - blocked_before) * 1e3) + " ms");
}

void Trainer::evaluate_after_epoch(int64_t epoch) {
  const bool last = epoch + 1 == epochs_;
  evaluated_last_ = spec_.train.eval_every_epochs > 0 &&
                    ((epoch + 1) % spec_.train.eval_every_epochs == 0 || last);
  if (!evaluated_last_) return;
  TraceScope trace(timeline_.get(), "evaluation", step_);
  if (faults_.stalls_in("evaluation")) FaultPlan::stall(world_.rank(), "before the evaluation");
  const EvalResult eval =
      evaluate(*parts_.model, *parts_.data->test, spec_, world_, *world_comm_, control_watch_.get(), step_);
  result_.test_loss = eval.loss;
  result_.test_accuracy = eval.accuracy;
  log_.eval(epoch, step_, eval);
  if (auto diagnosis = divergence_->after_eval(step_, eval.accuracy,
                                               schedule_->lr_at(std::max<int64_t>(step_ - 1, 0))))
    diverged(*diagnosis);
}

void Trainer::diverged(const std::string& diagnosis) {
  if (spec_.train.on_divergence == OnDivergence::kAbort)
    throw CollectiveFailure(ExitCode::kRuntime, diagnosis + " (train.on_divergence: abort)",
                            world_.rank() == 0);
  if (world_.rank() == 0)
    log_warn(diagnosis + " (train.on_divergence: abort would end the run here)");
}

void Trainer::finish() {
  // The checkpoint of the last step (before the buffer averaging below, like every other
  // checkpoint, so a later run with more steps continues exactly as an uninterrupted one).
  if (checkpointer_->last_saved_step() != step_)
    save_checkpoint(/*wait=*/true);
  else
    watched("checkpoint agreement", [&] { run_on_all_ranks(world_.comm(), [&] { checkpointer_->wait(); }); });
  result_.checkpoint_blocked_seconds = checkpointer_->blocked_seconds();
  if (result_.skipped_samples > 0)
    log_warn(std::to_string(result_.skipped_samples) +
             " bad training sample(s) were skipped on this rank and replaced in their batches (data.on_bad_record: skip)");
  // Keep buffers averaged (and the replicas identical) for the saved model.
  if (!evaluated_last_) watched("buffer average", [&] { average_buffers(*parts_.model, *world_comm_); });
  result_.steps = step_;
  result_.images_per_sec =
      result_.train_seconds > 0
          ? static_cast<double>(step_ * log_.global_batch()) / result_.train_seconds
          : 0;
  if (world_.rank() == 0) {
    TraceScope trace(timeline_.get(), "save_model", step_);
    save_model(*parts_.model, spec_, world_, result_, epochs_, parts_.data->train->class_names());
  }
  log_.done(result_, evaluated_last_);
}

void Trainer::finish_without_training() {
  const std::string model_file = (std::filesystem::path(spec_.output.model_dir) / "model.safetensors").string();
  // Rank 0 alone reads the file; every rank takes the same way (the evaluation is collective).
  std::string kept = world_.rank() == 0 && is_final_model_of(model_file, spec_, step_) ? "1" : "";
  watched("resume agreement", [&] { kept = broadcast_string(world_.comm(), kept, 0); });
  result_.steps = step_;
  if (world_.rank() == 0)
    log_info("nothing to train: " + resumed_->path + " is at step " + std::to_string(step_) +
             (step_ > total_steps_ ? ", past" : ", the end of") + " this job's " + std::to_string(total_steps_) +
             " steps (train.epochs, train.max_steps); " +
             (kept.empty() ? "the final model is written now from it to " + model_file
                           : "the final model of the run that wrote it is already in " + model_file +
                                 " and is left as it is") +
             ". To train further, raise train.epochs or train.max_steps; to start afresh, set "
             "checkpoint.resume: never or another checkpoint.dir");
  if (!kept.empty()) return;
  evaluate_after_epoch(epochs_ - 1);  // the final model's metadata holds its test accuracy
  if (!evaluated_last_) watched("buffer average", [&] { average_buffers(*parts_.model, *world_comm_); });
  if (world_.rank() == 0) save_model(*parts_.model, spec_, world_, result_, epochs_, parts_.data->train->class_names());
}

void Trainer::record_layer_passes() {
  layer_profile_->collect();  // waits for the step's device work
  const auto& passes = layer_profile_->last_step();
  // The layers are known after the first step: room for the rest of the run, allocated once.
  if (!timeline_->reserved(TraceTrack::kLayers) && !passes.empty()) {
    const auto steps = static_cast<std::size_t>(std::max<int64_t>(total_steps_ - step_, 1));
    timeline_->reserve(TraceTrack::kLayers, std::min<std::size_t>(steps * passes.size(), kMaxTraceEvents));
  }
  const auto span = [](double seconds) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  };
  for (const nn::LayerProfile::TimedPass& pass : passes) {
    const auto start = layers_step_start_ + span(pass.start_seconds);
    const auto end = start + span(pass.seconds);
    timeline_->record(TraceTrack::kLayers, pass.unit->name.c_str(), start, end, step_, -1, -1,
                      pass.pass == nn::Pass::kForward ? "forward" : "backward");
  }
}

void Trainer::write_timeline() {
  if (!timeline_) return;
  const std::string& path = spec_.output.timeline;
  // Facts a reader needs to check the trace (the tests do): bytes reduced per step (the
  // gradients, and the step's agreement where the last bucket carries it).
  const std::string other =
      "{\"world_size\":" + std::to_string(world_.size()) + ",\"steps\":" + std::to_string(step_) +
      ",\"gradient_bytes\":" + std::to_string(parallel_->reduced_bytes()) +
      ",\"buckets\":" + std::to_string(parallel_->bucket_count()) + "}";
  watched("timeline gather", [&] { write_job_timeline(*timeline_, path, world_, other); });
}

}  // namespace sdp
