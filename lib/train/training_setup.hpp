// The parts of a training run, built from the job spec on every rank: the data splits,
// the model (on the job's device), the optimizer, the LR schedule and the training loader.
// build_training_parts() is collective: a bad data file or model option on any rank is
// reported once and every rank stops (distributed/agreement.hpp).
#pragma once

#include <cstdint>
#include <memory>

#include "config/job_spec.hpp"
#include "data/loading/data_loader.hpp"
#include "data/sets/dataset.hpp"
#include "data/sets/open_data.hpp"
#include "distributed/world.hpp"
#include "nn/model.hpp"
#include "obs/timeline.hpp"
#include "optim/capturable_update.hpp"
#include "optim/lr_schedule.hpp"
#include "optim/optimizer.hpp"
#include "optim/optimizer_factory.hpp"

namespace sdp {

struct TrainingParts {
  std::unique_ptr<DataSplits> data;  // on the heap: the loader keeps a reference into it
  std::unique_ptr<nn::Model> model;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<TrainLoader> loader;
};

// This rank's place among the job's readers of data (open_data.hpp).
DataReaders data_readers(const World& world, const std::string& token);
// Names this job's sockets between the ranks of a host (a Pipe-mode channel's reader): rank 0's
// random draw, the same on every rank. Collective.
std::string job_token(const World& world);
// A track's timeline buffer holds at most this many events (56 MB); a longer run keeps its
// first ones and reports how many it dropped.
constexpr std::size_t kMaxTraceEvents = std::size_t{1} << 20;
// output.timeline at the end of a run. Collective, with raw MPI calls: the caller watches it.
// Each rank writes its own trace (rank_trace_path: useful alone, and there even if the merge
// fails), then rank 0 the merged one, gathered over MPI (hosts need not share a file system);
// rank 0 logs where they are and how many events the ranks left out. `other_data`: the JSON
// object of the trace's "otherData" (run facts).
void write_job_timeline(const Timeline& timeline, const std::string& path, const World& world,
                        const std::string& other_data);
// The train and test splits data.format names (data/sets/open_data.hpp; not collective: wrap in
// run_on_all_ranks).
// With data.decode: gpu, each loader decodes its JPEGs with nvJPEG on `device` (an InputError
// naming the key when that cannot be).
DataSplits load_data(const JobSpec& spec, const DataReaders& readers = {}, const Device& device = Device::cpu());
// The model.name model for `data`'s image shape on `device` (not collective).
std::unique_ptr<nn::Model> build_model(const JobSpec& spec, const SampleSource& data, const Device& device);
// The optimizer the job's optimizer section describes (make_optimizer's options).
OptimizerOptions optimizer_options(const OptimizerSpec& optimizer);
// The activations' dtype of `precision`: f32, or f16 / bf16 under mixed precision.
DType compute_dtype(Precision precision);
// Whether the model computes channels_last end to end (model.memory_format) on `device`: a GPU
// in 16 bits or tf32, unless the key says nchw (auto and channels_last both take it); a GPU in
// fp32 when the key says channels_last.
bool uses_channels_last(const JobSpec& spec, const Device& device);
// The GPU layers' math and algorithm rules of the job (precision: tf32, train.deterministic,
// train.conv_algorithms, train.cudnn_workspace_mb), and the plan's line for them.
nn::ComputeRules compute_rules(const JobSpec& spec);
std::string describe_compute_rules(const JobSpec& spec, const Device& device);
// The plan's line for it: the layout and which BatchNorm runs.
std::string describe_memory_format(const JobSpec& spec, const Device& device);
// Whether a training configure asks the BatchNorms between two convolutions to fold into them
// (model.batchnorm: folded, on a GPU, in 16 bits, channels_last; auto stays separate until a GPU
// run has checked the folded path: CudnnFusionOnGpu, FoldedBatchNormOnGpu, gpu-session's fusions
// stage), and the plan's line for it. folded_inner folds those alone; folded, each residual
// branch's last BatchNorm with its block's sum too (folds_residual_batchnorm).
bool folds_batchnorm(const JobSpec& spec, const Device& device);
bool folds_residual_batchnorm(const JobSpec& spec, const Device& device);
std::string describe_batchnorm(const JobSpec& spec, const Device& device);
// Whether a training configure asks each residual block to sum its input gradient in its branch's
// first convolution's pass (model.grad_sum: fused, on a GPU, in 16 bits, channels_last; auto
// stays separate until a GPU run has checked it), and the plan's line for it.
bool fuses_grad_sum(const JobSpec& spec, const Device& device);
std::string describe_grad_sum(const JobSpec& spec, const Device& device);
// Whether encoded images are decoded by nvJPEG on `device` (data.decode: gpu; auto where the
// rank computes on a GPU and nvJPEG loads; checked on an H100, 2026-11-26).
bool decodes_on_gpu(const JobSpec& spec, const Device& device);
// Whether nvJPEG decodes each crop's region alone where the JPEGs decode on the GPU (on the
// hardware decoder): data.decode_roi: on; auto stays off until a GPU run has checked it
// (NvjpegOffload.RegionDecodingGivesTheWholeDecodesPixels, gpu-session's decode-data stage).
bool decodes_regions(const JobSpec& spec);
// Whether nvJPEG's kernel writes the batch's normalised values (data.normalize_on: gpu, and
// auto, wherever the JPEGs decode on the GPU; checked on an H100, 2026-11-27).
bool normalizes_on_gpu(const JobSpec& spec, const Device& device);
// Whether a training step's buffers share one arena (model.memory_plan: shared, and auto on
// both devices: on a GPU the same bits as per_layer in under half the memory, H100 2026-11-26).
bool uses_memory_plan(const JobSpec& spec, const Device& device);
// Whether that arena keeps an output for backward only where backward reads it and holds each
// cuDNN operation's workspace while it runs (model.memory_plan: lean; a GPU's BatchNorms without
// an activation, the projection shortcuts' among them: ResNet-50 b256 amp-fp16 by its layer
// shapes 10.1 instead of 10.8 GiB of activations; no shared workspace beside them). Opt-in until
// a GPU run has checked it.
bool uses_lean_memory_plan(const JobSpec& spec, const Device& device);
// Whether the trainer reads a step's loss at the step's end (train.loss_read: step_end, and
// auto) rather than after each forward: one host wait a step less on a GPU, the same bits; on
// the CPU both are the same computation.
bool reads_loss_at_step_end(const JobSpec& spec, const Device& device);
// The plan's `loss read` line.
std::string describe_loss_read(const JobSpec& spec, const Device& device);
// Whether a GPU job's steps are to be recorded as CUDA graphs (train.cuda_graphs: on, and auto
// on a GPU: the same bits as launches, ResNet-20 amp-fp16's step 2.5x faster on an H100,
// 2026-11-27). The model may still not be recordable (nn/model.hpp step_graph_obstacle).
bool wants_cuda_graphs(const JobSpec& spec, const Device& device);
// The plan's `graphs` line (train.cuda_graphs): whether a step of this job on `ranks` ranks
// is recorded once and replayed, or why not (the trainer logs the same at start).
std::string describe_cuda_graphs(const JobSpec& spec, const Device& device, int ranks);
// Whether the trainer's update is decided and applied on the device (optimizer.capturable: on,
// a GPU, one micro-batch a step, one rank or stream-ordered buckets; auto stays off until a GPU
// run has checked it), so that a step graph holds it, and the plan's `update` line.
bool uses_capturable_update(const JobSpec& spec, const Device& device, int ranks);
// Whether several GPU ranks' gradient buckets are to be started by the training thread and
// ordered on the GPU's streams (distributed.stream_ordered: on, one micro-batch a step; auto
// stays off until a GPU run has checked it). Whether they are also depends on the
// communicators (train/data_parallel.hpp: NCCL alone).
bool orders_buckets_on_streams(const JobSpec& spec, const Device& device);
// optimizer.capturable's device work for `model`'s step (recordable): its gradients at its loss
// scale, and with `with_loss` its loss on the device (one rank: the host's mean is this loss;
// several decide on the averaged gradients alone, the same bits everywhere).
void queue_capturable_update(CapturableUpdate& update, nn::Model& model, bool with_loss);
std::string describe_update(const JobSpec& spec, const Device& device, int ranks);
// Why train.loss_read: forward keeps a step from being recorded (the plan's line, the trainer's log).
extern const char* const kLossReadForwardKeepsStepsLaunched;
// Whether encoded images are normalised straight into the model's 16-bit channels_last input
// (data.batch_type: compute or auto, on such a model; f32 keeps the cast on the GPU).
bool loads_compute_batches(const JobSpec& spec, const Device& device);
// The plan's `batches` line (encoded images only).
std::string describe_batch_type(const JobSpec& spec, const Device& device);
// The plan's `memory` line: which way, and why.
std::string describe_memory_plan(const JobSpec& spec, const Device& device);

// How the ranks split the set at `path` (data.shard): `rank`, all ranks the whole set; `host`,
// the ranks of each host the set that host sees (SageMaker's ShardedByS3Key gives each host its
// own files at the same path); `auto`, host for a SageMaker channel distributed ShardedByS3Key
// (inputdataconfig.json), rank otherwise.
DataShard resolve_data_shard(DataShard shard, const std::string& path);
// This rank's place among the readers of the set at `path`: (rank, size) of the world, or of
// its host under data.shard host.
std::pair<int, int> data_reader(const JobSpec& spec, const std::string& path, const World& world);

// The training loader of rank `rank` of `world` ranks, as the job spec sets it; `device`: where
// the model computes (a GPU model's batches go to page-locked memory).
LoaderOptions train_loader_options(const JobSpec& spec, int rank, int world, const Device& device);

// Collective.
TrainingParts build_training_parts(const JobSpec& spec, const World& world, const Device& device);

// The LR of every optimizer step on `world_size` ranks (the rule of train/global_batch.hpp).
LrSchedule make_schedule(const JobSpec& spec, int world_size, int64_t steps_per_epoch,
                         int64_t total_steps);

}  // namespace sdp
