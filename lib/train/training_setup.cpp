#include "train/training_setup.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>

#include "core/cpu_dispatch.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "config/sagemaker_env.hpp"
#include "distributed/agreement.hpp"
#include "distributed/collectives.hpp"
#include "data/images/nvjpeg_offload.hpp"
#include "models/registry.hpp"
#include "nn/threads.hpp"
#include "optim/optimizer_factory.hpp"
#include "train/global_batch.hpp"

namespace sdp {

DataReaders data_readers(const World& world, const std::string& token) {
  return {world.rank(), world.size(), world.local_rank(), world.local_size(), world.node(), world.nodes(), token};
}

namespace {

// `key` asks for what only the GPU decoder does, on a rank that decodes on the CPU: exit 2
// naming the key and why this rank does not decode on the GPU.
void require_gpu_decoding(bool asked, const JobSpec& spec, const Device& device, const std::string& key,
                          const std::string& what, const std::string& instead) {
  if (!asked || decodes_on_gpu(spec, device)) return;
  throw InputError("key '" + key + "': " + what + ", but this rank decodes on the CPU (" +
                   (device.is_cuda() ? "nvJPEG: " + nvjpeg_status().reason : std::string("it computes on the CPU")) +
                   "); use " + instead);
}

}  // namespace

DataSplits load_data(const JobSpec& spec, const DataReaders& readers, const Device& device) {
  DataJob job;
  require_gpu_decoding(spec.data.normalize_on == "gpu", spec, device, "data.normalize_on",
                       "gpu normalises in the GPU decoder's kernel", "data.normalize_on: cpu or auto");
  require_gpu_decoding(decodes_regions(spec), spec, device, "data.decode_roi", "on decodes regions with nvJPEG",
                       "data.decode_roi: off or auto");
  require_gpu_decoding(spec.data.nvjpeg_backend != "auto", spec, device, "data.nvjpeg_backend",
                       spec.data.nvjpeg_backend + " picks nvJPEG's backend", "data.nvjpeg_backend: auto");
  job.normalize_on_offload = normalizes_on_gpu(spec, device);
  if (decodes_on_gpu(spec, device)) {
    const bool regions = decodes_regions(spec);
    const std::string backend = spec.data.nvjpeg_backend;
    // Fails here, before any file is read.
    std::shared_ptr<JpegOffload> first = make_nvjpeg_offload(device, regions, backend);
    // Which backend the library gave (the hardware decoder refuses progressive files).
    if (readers.rank == 0) log_info("JPEGs decoded by " + first->describe());
    job.make_offload = [first, device, regions, backend]() mutable {
      if (first) return std::exchange(first, nullptr);
      return make_nvjpeg_offload(device, regions, backend);
    };
  }
  job.num_classes = spec.model.num_classes;
  job.seed = spec.seed;
  job.workers = nn::num_threads();
  job.timeout_s = spec.distributed.timeout_s;
  if (loads_compute_batches(spec, device)) {
    job.batch_dtype = compute_dtype(spec.precision);
    job.batch_channels_last = true;
  }
  return open_data(spec.data, job, readers);
}

std::unique_ptr<nn::Model> build_model(const JobSpec& spec, const SampleSource& data, const Device& device) {
  if (data.num_classes() > spec.model.num_classes)
    throw InputError("key 'model.num_classes' is " + std::to_string(spec.model.num_classes) + " but the " +
                     data.name() + " data has " + std::to_string(data.num_classes()) + " classes");
  models::ModelOptions options;
  options.name = spec.model.name;
  options.num_classes = spec.model.num_classes;
  options.in_channels = data.channels();
  options.height = data.height();
  options.width = data.width();
  options.hidden = spec.model.hidden;
  options.dropout = static_cast<float>(spec.model.dropout);
  options.zero_init_residual = spec.model.zero_init_residual;
  options.seed = spec.seed;
  options.device = device;
  std::unique_ptr<nn::Model> model = models::make_model(options);
  model->set_label_smoothing(static_cast<float>(spec.train.label_smoothing));
  model->set_compute_dtype(compute_dtype(spec.precision));
  model->set_channels_last(uses_channels_last(spec, device));
  model->set_gradient_plan_enabled(uses_memory_plan(spec, device));
  model->set_lean_memory_plan(uses_lean_memory_plan(spec, device));
  model->set_batchnorm_folding(folds_batchnorm(spec, device), folds_residual_batchnorm(spec, device));
  model->set_grad_sum_fused(fuses_grad_sum(spec, device));
  if (device.is_cuda()) model->set_compute_rules(compute_rules(spec));
  return model;
}

nn::ComputeRules compute_rules(const JobSpec& spec) {
  nn::ComputeRules rules;
  rules.tf32 = spec.precision == Precision::kTf32;
  rules.deterministic = spec.train.deterministic;
  rules.measure_algorithms = spec.train.conv_algorithms == "measured";
  rules.workspace_limit = static_cast<std::size_t>(spec.train.cudnn_workspace_mb) << 20;
  return rules;
}

std::string describe_compute_rules(const JobSpec& spec, const Device& device) {
  // Our own CPU loops (the max pool, the optimizers, the checks) run in the ISA chosen at start.
  if (!device.is_cuda()) return "f32 on oneDNN (CPU); own kernels " + cpu_kernel_isa_summary();
  const std::string math = spec.precision == Precision::kTf32 ? "f32 storage on TF32 tensor cores (cuDNN, cuBLAS)"
                           : is_mixed_precision(spec.precision) ? to_string(spec.precision) + " on tensor cores"
                                                                : "f32, no TF32";
  return math + "; convolution algorithms " +
         (spec.train.deterministic ? std::string("deterministic only") : std::string("any (not bitwise repeatable)")) +
         ", " + (spec.train.conv_algorithms == "measured" ? "timed by cuDNN" : "ranked by cuDNN's heuristics") +
         ", workspace <= " + std::to_string(spec.train.cudnn_workspace_mb) + " MB";
}

// 16 bits and tf32: channels_last unless the key says nchw (an H100 checked tf32's, 2026-11-27:
// 1.21x PyTorch channels_last). fp32 without TF32: only when the key asks (cuDNN's f32 NHWC
// convolutions ran 4x slower than NCHW there).
bool uses_channels_last(const JobSpec& spec, const Device& device) {
  if (!device.is_cuda()) return false;
  if (spec.precision == Precision::kFp32) return spec.model.memory_format == "channels_last";
  return spec.model.memory_format != "nchw";
}

std::string describe_memory_format(const JobSpec& spec, const Device& device) {
  if (!device.is_cuda()) return "oneDNN's own layouts (CPU)";
  const std::string key = spec.model.memory_format == "auto" ? " (auto)" : "";
  if (uses_channels_last(spec, device))
    return "channels_last" + key + ": NHWC end to end, BatchNorm fused with its ReLU and the residual sum (cuDNN)" +
           (spec.precision == Precision::kFp32 ? "; f32 convolutions without TF32 run slower NHWC than NCHW"
                                               : std::string());
  return "nchw" + key +
         (spec.precision == Precision::kFp32
              ? ": fp32 computes NCHW (cuDNN's f32 NHWC convolutions are slower without TF32); "
                "model.memory_format: channels_last takes NHWC"
              : std::string(": NCHW, the residual sum and ReLU in one pass; model.memory_format: channels_last is "
                            "the fused NHWC path"));
}

bool folds_batchnorm(const JobSpec& spec, const Device& device) {
  return (spec.model.batchnorm == "folded" || spec.model.batchnorm == "folded_inner") &&
         is_mixed_precision(spec.precision) && uses_channels_last(spec, device);
}

bool folds_residual_batchnorm(const JobSpec& spec, const Device& device) {
  return spec.model.batchnorm == "folded" && folds_batchnorm(spec, device);
}

std::string describe_batchnorm(const JobSpec& spec, const Device& device) {
  if (!device.is_cuda()) return "separate (oneDNN, CPU)";
  if (folds_batchnorm(spec, device)) {
    std::string line = spec.model.batchnorm +
                       ": each BatchNorm with its ReLU between two convolutions of a residual branch runs inside "
                       "them (statistics from the first's epilogue, applied as the second loads; cuDNN graphs), its "
                       "output never stored";
    if (folds_residual_batchnorm(spec, device))
      line += "; each branch's last, with its block's sum, takes its statistics from the convolution before it and "
              "runs as one pass forward and cuDNN's batchnorm backward through the ReLU's bits";
    else
      line += "; each branch's last stays cuDNN's BatchNorm with the block's sum (folded folds it too)";
    return line + "; where cuDNN builds no folded pass a BatchNorm stays separate, and the log says which";
  }
  const std::string key = spec.model.batchnorm == "auto" ? " (auto)" : "";
  std::string line = "separate" + key + ": each BatchNorm a pass of its own";
  if (spec.model.batchnorm == "folded" || spec.model.batchnorm == "folded_inner")
    line += "; " + spec.model.batchnorm + " needs 16-bit activations in the channels_last layout";
  else if (is_mixed_precision(spec.precision) && uses_channels_last(spec, device))
    line += "; model.batchnorm: folded runs them inside the convolutions (opt-in until a GPU run has checked it)";
  return line;
}

bool fuses_grad_sum(const JobSpec& spec, const Device& device) {
  return spec.model.grad_sum == "fused" && is_mixed_precision(spec.precision) && uses_channels_last(spec, device);
}

std::string describe_grad_sum(const JobSpec& spec, const Device& device) {
  if (!device.is_cuda()) return "separate (oneDNN, CPU)";
  if (fuses_grad_sum(spec, device))
    return "fused: each residual block's input gradient adds its shortcut's term in the epilogue of its first "
           "convolution's input gradient pass (cuDNN graphs); where cuDNN builds none the block sums in a pass of its "
           "own, and the log says which";
  const std::string key = spec.model.grad_sum == "auto" ? " (auto)" : "";
  std::string line = "separate" + key + ": each residual block sums its input gradients in a pass of its own";
  if (spec.model.grad_sum == "fused")
    line += "; fused needs 16-bit activations in the channels_last layout";
  else if (is_mixed_precision(spec.precision) && uses_channels_last(spec, device))
    line += "; model.grad_sum: fused sums them in the convolution's pass (opt-in until a GPU run has checked it)";
  return line;
}

bool decodes_on_gpu(const JobSpec& spec, const Device& device) {
  switch (spec.data.decode) {
    case DecodeChoice::kGpu:
      return true;
    case DecodeChoice::kCpu:
      return false;
    case DecodeChoice::kAuto:
      break;
  }
  return device.is_cuda() && is_encoded_images(spec.data.format) && nvjpeg_status().available;
}

bool decodes_regions(const JobSpec& spec) {
  return spec.data.decode_roi == "on";
}

bool normalizes_on_gpu(const JobSpec& spec, const Device& device) {
  return spec.data.normalize_on != "cpu" && decodes_on_gpu(spec, device);
}

bool uses_memory_plan(const JobSpec& spec, const Device&) {
  return spec.model.memory_plan != "per_layer";  // auto: shared on both devices
}

bool uses_lean_memory_plan(const JobSpec& spec, const Device& device) {
  return spec.model.memory_plan == "lean" && device.is_cuda();
}

std::string describe_memory_plan(const JobSpec& spec, const Device& device) {
  const std::string key = spec.model.memory_plan == "auto" ? " (auto)" : "";
  if (uses_lean_memory_plan(spec, device))
    return "lean: the layers' outputs, backward's buffers and cuDNN's workspaces in one arena, each reused once its "
           "last reader has run; an output backward does not read (a BatchNorm's without its ReLU) is not kept for it";
  if (uses_memory_plan(spec, device))
    return (spec.model.memory_plan == "lean" ? std::string("shared (lean is a GPU's)") : "shared" + key) +
           (device.is_cuda() ? ": the layers' outputs and backward's buffers" : ": backward's buffers") +
           " in one arena, each reused once its last reader has run";
  return "per_layer" + key + ": every layer keeps its own";
}

bool loads_compute_batches(const JobSpec& spec, const Device& device) {
  return spec.data.batch_type != "f32" && is_encoded_images(spec.data.format) && is_mixed_precision(spec.precision) &&
         uses_channels_last(spec, device);
}

std::string describe_batch_type(const JobSpec& spec, const Device& device) {
  const std::string key = spec.data.batch_type == "auto" ? " (auto)" : "";
  if (loads_compute_batches(spec, device))
    return "compute" + key + ": " + dtype_name(compute_dtype(spec.precision)) +
           " NHWC, the first layer's own input (half the bytes to copy, no cast on the GPU)";
  std::string why;
  if (spec.data.batch_type == "compute")
    why = "; compute is the 16-bit channels_last models' input, and this one computes in f32 or NCHW";
  return "f32" + key + ": NCHW, cast and reordered on the model's device" + why;
}

bool reads_loss_at_step_end(const JobSpec& spec, const Device&) {
  return spec.train.loss_read != "forward";  // auto: step_end on both devices
}

std::string describe_loss_read(const JobSpec& spec, const Device& device) {
  if (!device.is_cuda()) return "as computed (CPU)";
  const std::string key = spec.train.loss_read == "auto" ? " (auto)" : "";
  if (reads_loss_at_step_end(spec, device))
    return "step_end" + key + ": the host queues backward while forward runs and reads the loss once the step's "
           "gradients are averaged";
  return "forward" + key + ": the host waits for each forward's loss before queuing backward";
}

const char* const kLossReadForwardKeepsStepsLaunched =
    "train.loss_read: forward waits for each forward's loss in the middle of the step";

bool wants_cuda_graphs(const JobSpec& spec, const Device& device) {
  return spec.train.cuda_graphs == "on" || (spec.train.cuda_graphs == "auto" && device.is_cuda());
}

bool uses_capturable_update(const JobSpec& spec, const Device& device, int ranks) {
  return spec.optimizer.capturable == "on" && device.is_cuda() && spec.train.accumulate_steps == 1 &&
         (ranks == 1 || orders_buckets_on_streams(spec, device));
}

void queue_capturable_update(CapturableUpdate& update, nn::Model& model, bool with_loss) {
  const nn::Model::DeviceLoss loss = with_loss ? model.loss_on_device() : nn::Model::DeviceLoss{};
  update.queue(model.store().grad_arena(), model.loss_scale(), loss.sum, loss.rows);
}

bool orders_buckets_on_streams(const JobSpec& spec, const Device& device) {
  return spec.distributed.stream_ordered == "on" && device.is_cuda() && spec.train.accumulate_steps == 1;
}

std::string describe_update(const JobSpec& spec, const Device& device, int ranks) {
  if (!device.is_cuda()) return "on the host (CPU)";
  if (uses_capturable_update(spec, device, ranks))
    return std::string("on the device (optimizer.capturable: on): ") +
           (ranks == 1 ? "the gradients and the loss checked there"
                       : "the averaged gradients checked there (the loss is agreed on the host after the step)") +
           ", a step that is not finite skipped there, the learning rate read from device memory; " +
           (wants_cuda_graphs(spec, device) ? "recorded with forward and backward where the step is"
                                            : "launched after backward (train.cuda_graphs: off)");
  std::string line = "decided on the host: the step's loss read, the gradients checked (a second wait for the GPU), "
                     "then the update launched";
  if (spec.optimizer.capturable != "on")
    return line + " (optimizer.capturable: on decides it on the device, so a step graph holds it; opt-in until a "
                  "GPU run has checked it)";
  return line + "; optimizer.capturable: on applies with train.accumulate_steps 1, on several ranks with "
                "distributed.stream_ordered: on (the buckets joined on the device first)";
}

std::string describe_cuda_graphs(const JobSpec& spec, const Device& device, int ranks) {
  const std::string key = spec.train.cuda_graphs == "auto" ? " (auto)" : "";
  if (!device.is_cuda() && spec.train.cuda_graphs != "on") return "off (CPU)";
  if (!wants_cuda_graphs(spec, device))
    return "off: each step's kernels are launched one by one (train.cuda_graphs: on records forward and backward "
           "once and replays them)";
  std::string obstacle, backward_obstacle;
  if (!device.is_cuda())
    obstacle = "this rank computes on the CPU";
  else if (spec.model.dropout > 0)
    obstacle = "model.dropout draws new masks every step";
  else if (!reads_loss_at_step_end(spec, device))
    obstacle = kLossReadForwardKeepsStepsLaunched;
  else if (ranks > 1 && !orders_buckets_on_streams(spec, device))
    backward_obstacle = "the gradients are reduced across ranks as backward makes them, by the communication thread "
                        "(distributed.stream_ordered: on orders them on the GPU's streams, so a recording holds them)";
  else if (spec.train.accumulate_steps > 1)
    backward_obstacle = "train.accumulate_steps sums the gradients of micro-batches as backward makes them";
  if (!obstacle.empty()) return "on" + key + ", but the steps run as launches: " + obstacle;
  if (!backward_obstacle.empty() && spec.train.cuda_graphs != "on")
    return "on" + key + ", but the steps run as launches: " + backward_obstacle +
           "; train.cuda_graphs: on records the forward alone";
  if (!backward_obstacle.empty())
    return "on: forward recorded once (the third step after a new batch shape or an evaluation) and replayed, "
           "backward launched: " + backward_obstacle;
  if (ranks > 1)
    return "on" + key + ": forward, backward and the gradient buckets' NCCL calls (distributed.stream_ordered: on) "
           "recorded once (the third step after a new batch shape or an evaluation, on every rank or none) and "
           "replayed as one launch; where a bucket does not run over NCCL alone the log says why and the steps run "
           "as without it";
  return "on" + key + ": forward and backward recorded once (the third step after a new batch shape or an evaluation) "
         "and replayed as one launch";
}

DType compute_dtype(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
    case Precision::kTf32: return DType::kF32;
    case Precision::kAmpFp16: return DType::kF16;
    case Precision::kAmpBf16: return DType::kBF16;
  }
  throw std::logic_error("compute_dtype: unhandled Precision");
}

OptimizerOptions optimizer_options(const OptimizerSpec& o) {
  OptimizerOptions options;
  options.kind = o.name;
  options.momentum = static_cast<float>(o.momentum);
  options.nesterov = o.nesterov;
  options.beta1 = static_cast<float>(o.beta1);
  options.beta2 = static_cast<float>(o.beta2);
  options.eps = static_cast<float>(o.eps);
  options.weight_decay = static_cast<float>(o.weight_decay);
  options.trust_coefficient = static_cast<float>(o.trust_coefficient);
  return options;
}

DataShard resolve_data_shard(DataShard shard, const std::string& path) {
  if (shard != DataShard::kAuto) return shard;
  const auto channel = channel_config(path);
  return channel && channel->distribution == "ShardedByS3Key" ? DataShard::kHost : DataShard::kRank;
}

std::pair<int, int> data_reader(const JobSpec& spec, const std::string& path, const World& world) {
  if (resolve_data_shard(spec.data.shard, path) == DataShard::kHost) return {world.local_rank(), world.local_size()};
  return {world.rank(), world.size()};
}

LoaderOptions train_loader_options(const JobSpec& spec, int rank, int world, const Device& device) {
  LoaderOptions options;
  options.batch_size = spec.data.batch_size;
  options.accumulate = spec.train.accumulate_steps;
  options.seed = spec.seed;
  options.rank = rank;
  options.world = world;
  options.prefetch = spec.data.prefetch;
  options.augment = augment_options(spec.data);
  // A GPU model copies each batch in on a copy stream while the previous step computes,
  // which needs page-locked memory to run asynchronously.
  options.pinned = !device.is_cpu();
  return options;
}

void write_job_timeline(const Timeline& timeline, const std::string& path, const World& world,
                        const std::string& other_data) {
  const std::string events = timeline.events_json();
  double dropped_sum = static_cast<double>(timeline.dropped());
  run_on_all_ranks(world.comm(), [&] {
    write_trace_file(rank_trace_path(path, world.rank()), {events}, other_data);
  });
  const std::vector<std::string> all = gather_strings(world.comm(), events, 0);
  run_on_all_ranks(world.comm(), [&] {
    if (world.rank() == 0) write_trace_file(path, all, other_data);
  });
  if (world.size() > 1) allreduce_sum(world.comm(), &dropped_sum, 1);
  if (world.rank() != 0) return;
  log_info("timeline: " + path + " (all " + std::to_string(world.size()) + " ranks; each rank's alone in " +
           rank_trace_path(path, 0) + " and the like); open it in https://ui.perfetto.dev or chrome://tracing");
  if (dropped_sum > 0)
    log_warn("timeline: " + std::to_string(static_cast<int64_t>(dropped_sum)) +
             " events left out: the buffer holds " + std::to_string(kMaxTraceEvents) +
             " per track and rank; trace fewer steps (train.max_steps)");
}

std::string job_token(const World& world) {
  return broadcast_string(world.comm(), std::to_string(std::random_device{}()) + "-" + std::to_string(::getpid()));
}

TrainingParts build_training_parts(const JobSpec& spec, const World& world, const Device& device) {
  TrainingParts parts;
  const std::string token = job_token(world);
  run_on_all_ranks(world.comm(), [&] {
    parts.data = std::make_unique<DataSplits>(load_data(spec, data_readers(world, token), device));
    const DataSplits& data = *parts.data;
    parts.model = build_model(spec, *data.train, device);
    parts.optimizer = make_optimizer(optimizer_options(spec.optimizer), parts.model->store());
    const auto [reader, readers] = data_reader(spec, spec.data.train, world);
    const LoaderOptions loader_options = train_loader_options(spec, reader, readers, device);
    const GlobalBatch batch = global_batch(spec, readers);  // over the ranks that share this set
    if (data.train->count() < batch.size())
      throw InputError("key 'data.batch_size': " + std::to_string(batch.per_rank) + " x " +
                       std::to_string(batch.ranks) + " rank(s)" + (readers < world.size() ? " of this host" : "") +
                       (batch.accumulate > 1 ? " x " + std::to_string(batch.accumulate) +
                                                   " micro-batches (train.accumulate_steps)"
                                             : std::string()) +
                       " is more than the " + std::to_string(data.train->count()) +
                       " training samples" + (readers < world.size() ? " this host holds" : "") +
                       ": not one step per epoch");
    parts.loader = data.train->make_train_loader(loader_options);
    if (world.rank() == 0) log_info("training data " + data.train->describe());
    if (world.rank() == 0 && data.test->count() < 0) log_info("test data " + data.test->describe());  // a pipe
  });
  // One set per host: the hosts' sets differ in size, and every rank must run the same steps.
  if (data_reader(spec, spec.data.train, world).second < world.size()) {
    const std::vector<int> steps = allgather_ints(world.comm(), static_cast<int>(parts.loader->steps_per_epoch()));
    const int fewest = *std::min_element(steps.begin(), steps.end());
    parts.loader->limit_steps_per_epoch(fewest);
    if (world.rank() == 0)
      log_info("data.shard host: each host reads its own set; steps per epoch " + std::to_string(fewest) +
               (fewest < *std::max_element(steps.begin(), steps.end())
                    ? " (the smallest host set's; hosts with more leave the rest of each epoch's order)"
                    : ""));
  }
  return parts;
}

LrSchedule make_schedule(const JobSpec& spec, int world_size, int64_t steps_per_epoch,
                         int64_t total_steps) {
  const OptimizerSpec& o = spec.optimizer;
  LrScheduleOptions options;
  options.base_lr = o.lr;
  options.scaling = o.lr_scaling;
  options.global_batch = global_batch(spec, world_size).size();
  options.reference_batch = reference_batch(spec);
  options.warmup_steps = o.warmup_steps > 0
                             ? o.warmup_steps
                             : std::llround(o.warmup_epochs * static_cast<double>(steps_per_epoch));
  options.kind = o.schedule;
  options.milestones.assign(o.milestones.begin(), o.milestones.end());
  options.gamma = o.gamma;
  options.min_lr = o.min_lr;
  options.steps_per_epoch = steps_per_epoch;
  options.total_steps = total_steps;
  return LrSchedule(options);
}

}  // namespace sdp
