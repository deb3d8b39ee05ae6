// JobSpec: the typed job description (docs/job-spec.md). Every key has a default; a YAML file,
// SageMaker's hyperparameters.json and --set overrides are applied in that order by
// JobSpecLoader (job_spec_loader.hpp), and validate_job_spec() (job_spec_validate.hpp) checks
// ranges in one place. Keys that take one of a few words are enums (choices.hpp), parsed once
// by the loader.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/choices.hpp"

namespace sdp {

struct ModelSpec {
  std::string name = "mlp";  // one of kModelNames (model_names.hpp)
  int num_classes = 10;
  std::vector<int> hidden = {512, 512};  // mlp layer widths
  double dropout = 0.0;
  bool zero_init_residual = false;  // resnets only
  // CTR models (deepfm, fm, lr; docs/ctr.md)
  int fields = 0;             // ids per sample (the sample's field_size)
  int64_t table_rows = 0;     // rows of the embedding tables (feature_size); ids are below it
  int embedding_size = 8;     // K
  double l2 = 0.0;            // L2 on the MLP's weights and on the table rows a step touches
  bool batch_norm = false;    // deepfm: BatchNorm after each hidden layer's ReLU
  double batch_norm_decay = 0.9;  // its running statistics' decay
  // replicated (every rank the whole table) | rows (rank r owns the rows id % world == r)
  std::string embedding_sharding = "replicated";
  // Activation layout on a GPU: channels_last (NHWC end to end, BatchNorm fused in cuDNN), nchw
  // (the plain layout, as before), auto (channels_last under 16-bit compute and tf32, nchw in
  // fp32; the CPU computes in oneDNN's layouts; training_setup.hpp: uses_channels_last).
  std::string memory_format = "auto";
  // Where a training step's buffers live: shared (one arena, each buffer reused once its last
  // reader has run: nn/gradient_plan.hpp; backward's buffers on the CPU, the layers' outputs
  // too on a GPU), per_layer (every layer its own), auto (shared on both devices;
  // training_setup.hpp).
  std::string memory_plan = "auto";
  // BatchNorm on a GPU: folded (each BatchNorm with its ReLU between two convolutions of a
  // residual branch folded into them: statistics from the first's epilogue, applied as the
  // second loads; and each branch's last, with its block's sum, after the convolution before it;
  // NHWC 16-bit, cuDNN graphs), folded_inner (only those between two convolutions), separate
  // (each BatchNorm a pass of its own), auto (separate until a GPU run has checked folded;
  // training_setup.hpp: folds_batchnorm).
  std::string batchnorm = "auto";
  // A residual block's input gradient sum (its branch's and its shortcut's) on a GPU: fused (in
  // the epilogue of the branch's first convolution's input gradient pass, a cuDNN graph; NHWC
  // 16-bit), separate (a pass of its own), auto (separate until a GPU run has checked fused;
  // training_setup.hpp: fuses_grad_sum).
  std::string grad_sum = "auto";
};

struct SyntheticDataSpec {
  int64_t train_samples = 8192;
  int64_t test_samples = 2048;
  int channels = 1;
  int height = 28;
  int width = 28;
  double noise = 0.5;  // noise strength relative to the class pattern
  double zipf = 1.1;   // CTR: the exponent of the ids' Zipf distribution in each field
};

struct DataSpec {
  DataFormat format = DataFormat::kSynthetic;
  std::string train = "${SM_CHANNEL_TRAINING:-data}";
  std::string test = "${SM_CHANNEL_TEST:-data}";
  int batch_size = 64;  // per rank; global batch = batch_size * world size * train.accumulate_steps
  DataShard shard = DataShard::kAuto;  // auto: host for a SageMaker channel ShardedByS3Key, else rank
  int prefetch = 4;  // deep enough that JPEG decoding jitter does not reach the step (docs/job-spec.md)
  Augmentation augment = Augmentation::kAuto;  // auto = crop+flip for cifar10
  SyntheticDataSpec synthetic;
  // Encoded images (tfrecord, image-folder): decoded and transformed as batches are made.
  int image_size = 224;  // the square crop the model reads
  int resize = 256;      // evaluation: the shorter side before the centre crop
  int workers = 0;       // decoding threads per loader; 0 = the rank's compute threads
  // JPEG decoding: on the CPU, or with nvJPEG on the rank's GPU; auto takes the GPU where the
  // rank computes on one and nvJPEG loads (docs/data-formats.md, "Decoding on the GPU").
  DecodeChoice decode = DecodeChoice::kAuto;
  // With nvJPEG decoding: where a decoded crop is normalised into the batch: cpu (the loader's
  // threads), gpu (the decoder's kernel writes the batch's values; the threads only read and
  // parse), auto (cpu until a GPU run has checked gpu; training_setup.hpp).
  std::string normalize_on = "auto";
  // With nvJPEG decoding on a hardware decoder (A100, H100): on decodes only each crop's source
  // region of an image (nvJPEG's ROI decode), off the whole image, auto off until a GPU run
  // has checked on (training_setup.hpp).
  std::string decode_roi = "auto";
  // With nvJPEG decoding: its backend. hardware (the A100/H100 JPEG engines), gpu_hybrid (CUDA
  // kernels; nvJPEG's GPU-assisted backend), nvjpeg_default (the library's own choice), auto
  // (hardware where the GPU has one, else gpu_hybrid).
  std::string nvjpeg_backend = "auto";
  // tfrecord, tar-shards, image-folder: the type and layout the loader normalises images into:
  // f32 (NCHW; the GPU casts and reorders), compute (a 16-bit channels_last model's own input,
  // f16/bf16 NHWC: half the bytes to copy, no cast; f32 NCHW for any other model), auto
  // (compute; training_setup.hpp).
  std::string batch_type = "auto";
  std::string normalize = "imagenet";  // imagenet or cifar10 mean/std
  std::string image_key = "image/encoded";      // tfrecord: the Example's encoded image
  std::string label_key = "image/class/label";  // tfrecord: the Example's int64 label
  int64_t label_offset = 0;                     // tfrecord: subtracted (ImageNet counts from 1)
  std::string on_bad_record = "abort";          // abort, or skip (replace, warn, count)
  std::string id_overflow = "error";            // CTR: an id >= model.table_rows: error | hash
  std::string ids_key = "ids";                  // CTR tfrecord: the Example's int64 ids
  std::string values_key = "values";            // CTR tfrecord: the Example's float values
  // CTR data: memory (every rank reads the set; a global permutation each epoch), stream (each
  // rank streams its share through data.shuffle_buffer), auto (stream for a Pipe-mode channel
  // and host shards, memory otherwise).
  std::string load = "auto";
  int64_t shuffle_buffer = 4096;  // streamed sets (tar-shards, gzip tfrecord): records shuffled at once
  int64_t samples_per_epoch = 0;  // a Pipe-mode channel's size (it cannot be counted before it is read)
};

struct TrainSpec {
  int epochs = 1;
  int64_t max_steps = 0;  // 0 = no limit
  int accumulate_steps = 1;  // micro-batches of data.batch_size per optimizer step
  double label_smoothing = 0.0;  // of the loss's one-hot target, in [0, 1)
  int log_every = 50;
  int eval_every_epochs = 1;  // 0 = evaluate only at the end
  OnNonfinite on_nonfinite = OnNonfinite::kAbort;
  OnDivergence on_divergence = OnDivergence::kWarn;
  // GPU convolutions: only algorithms that give the same bits every run (bitwise resume and
  // identical replicas rest on it), or any; ranked by cuDNN's heuristics or timed by cuDNN's find
  // once per shape; candidates needing more workspace than cudnn_workspace_mb are passed over.
  bool deterministic = true;
  std::string conv_algorithms = "heuristic";  // heuristic | measured
  int cudnn_workspace_mb = 512;
  // When the host reads a training step's loss on a GPU: forward (after each forward, waiting
  // for it, before queuing backward), step_end (once the step's gradients are averaged: the
  // host queues backward while forward runs), auto (step_end; training_setup.hpp). The CPU
  // computes as it goes either way.
  std::string loss_read = "auto";
  // CUDA graphs: a GPU step's forward and backward recorded once and replayed as one launch
  // (nn/model.hpp's step graphs), or queued kernel by kernel (off); auto: on for a GPU job
  // (training_setup.hpp wants_cuda_graphs; checked on an H100, 2026-11-27).
  std::string cuda_graphs = "auto";  // auto | off | on
};

struct OptimizerSpec {
  OptimizerKind name = OptimizerKind::kSgd;
  double lr = 0.01;  // the learning rate for a global batch of reference_batch samples
  // The global batch `lr` is stated for; 0 = unset: data.batch_size (lr is the LR of one rank
  // with one micro-batch, so it scales with world size x accumulate_steps).
  int64_t reference_batch = 0;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double trust_coefficient = 0.001;  // lars
  double initial_accumulator = 0.1;  // adagrad, ftrl: the squared-gradient sum's start
  double l1 = 0.0;                   // ftrl: L1 strength (sparsity)
  LrScaling lr_scaling = LrScaling::linear();
  double warmup_epochs = 0.0;
  int64_t warmup_steps = 0;  // an alternative to warmup_epochs (optimizer steps); not both
  ScheduleKind schedule = ScheduleKind::kConstant;
  std::vector<int> milestones;  // epochs, for schedule: step
  double gamma = 0.1;
  double min_lr = 0.0;  // cosine floor
  // A GPU update decided and applied on the device, recordable with the step in one CUDA graph
  // (optim/capturable_update.hpp; PyTorch's `capturable`): on, off; auto is off until a GPU run
  // has checked it (training_setup.hpp uses_capturable_update).
  std::string capturable = "auto";  // auto | off | on
};

struct DistributedSpec {
  CommBackend backend = CommBackend::kAuto;
  AllreduceKind allreduce = AllreduceKind::kAuto;
  double bucket_mb = 25.0;  // 0 = one bucket; kAutoBucketMb = auto (the plan's choice with a calibration, else 25)
  Compression compression = Compression::kAuto;  // resolve_compression (choices.hpp)
  int ranks_per_node = 0;  // 0 = auto (detected topology)
  double timeout_s = 600.0;
  double stall_warning_s = 60.0;
  int64_t check_every_steps = 0;  // replica checksum comparison; 0 = off
  // CTR models: how the embedding table's row gradients travel (ctr/row_exchange.hpp): sparse
  // (deduplicated per node), dense (an AllReduce of the whole table), auto (per step, the
  // fewer bytes).
  std::string embedding_exchange = "auto";
  bool share_gpus = false;  // more ranks than GPUs on a node: gradients over MPI through the host
  // GPU gradients across nodes: NCCL, or staged to host memory and summed by the CPUs
  // (set_up_job resolves auto into JobSetup::inter_node: inter_node.hpp).
  InterNode inter_node = InterNode::kAuto;
  // GPU gradients: each bucket's NCCL calls started by the training thread as backward reports
  // its gradients, ordered after them on the GPU's streams, with no host wait in the step, so a
  // step's CUDA graph can hold them (train/data_parallel.hpp); auto is off (the communication
  // thread orders them) until a GPU run has checked it.
  std::string stream_ordered = "auto";  // auto | off | on
  // A calibration file of `sdp-train plan --calibrate`: allreduce: auto and bucket_mb: auto
  // then take the plan's choice for this world at start (docs/guides/plan.md, "Let the job choose at start").
  std::string calibration;
};
// distributed.bucket_mb: auto.
constexpr double kAutoBucketMb = -1.0;

struct CheckpointSpec {
  std::string dir = "${SM_CHECKPOINT_DIR:-out/checkpoints}";
  int64_t every_steps = 500;  // 0 = only at the end
  int keep_last = 3;
  std::string resume = "auto";  // auto | never | a checkpoint file path
};

// The floating-point mode of every compute thread (core/floating_point.hpp).
struct NumericsSpec {
  bool flush_denormals = true;  // subnormal floats flushed to zero (FTZ/DAZ); false keeps IEEE's
};

struct OutputSpec {
  std::string model_dir = "${SM_MODEL_DIR:-out/model}";
  std::string metrics = "out/metrics.jsonl";  // "" = none
  std::string timeline = "";                  // Chrome trace path; "" = none
  bool timeline_layers = false;               // the timeline also gets every layer's passes
  // TensorBoard event files' directory; "" = none; auto = SageMaker's /opt/ml/output/tensorboard
  // there, none elsewhere (sagemaker_env.hpp: resolve_output_locations, tensorboard_directory).
  std::string tensorboard = "auto";
  ProgressMode progress = ProgressMode::kAuto;  // live bar on a terminal, else metric lines
};

struct JobSpec {
  std::string name = "job";
  uint64_t seed = 42;
  DevicePreference device = DevicePreference::kAuto;
  Precision precision = Precision::kFp32;
  int threads = 0;  // CPU threads per rank; 0 = cores / ranks per node
  ModelSpec model;
  DataSpec data;
  TrainSpec train;
  OptimizerSpec optimizer;
  DistributedSpec distributed;
  CheckpointSpec checkpoint;
  NumericsSpec numerics;
  OutputSpec output;
  // How the sources were read, for the log (printed once by rank 0): e.g. the SageMaker DeepFM
  // sample's hyperparameters and the keys they became. Not a key.
  std::vector<std::string> source_notes;
};

}  // namespace sdp
