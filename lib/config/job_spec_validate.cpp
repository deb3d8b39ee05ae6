#include "config/job_spec_validate.hpp"

#include "config/model_names.hpp"
#include "core/error.hpp"

namespace sdp {

namespace {

class RangeChecker {
 public:
  explicit RangeChecker(const std::map<std::string, std::string>& sources) : sources_(sources) {}
  void require(bool ok, const std::string& path, const std::string& what) const {
    if (ok) return;
    auto it = sources_.find(path);
    std::string where = it == sources_.end() ? "job spec" : it->second;
    if (where == "default") where = "job spec (default value)";
    throw InputError(where + ": key '" + path + "': " + what);
  }

 private:
  const std::map<std::string, std::string>& sources_;
};

// The top-level keys.
void check_job_keys(const JobSpec& spec, const RangeChecker& check) {
  check.require(!spec.name.empty(), "name", "must not be empty");
  check.require(spec.threads >= 0, "threads", "must be >= 0 (0 = cores / ranks per node)");
  check.require(spec.precision == Precision::kFp32 || spec.device != DevicePreference::kCpu,
                "precision",
                to_string(spec.precision) + " needs device: cuda (the CPU backend trains in fp32)");
}

// output.*
void check_output_keys(const JobSpec& spec, const RangeChecker& check) {
  check.require(!spec.output.timeline_layers || !spec.output.timeline.empty(), "output.timeline_layers",
                "true needs output.timeline (the file the layers' track goes in)");
}

// model.*
void check_model_keys(const JobSpec& spec, const RangeChecker& check) {
  const ModelSpec& m = spec.model;
  check.require(m.num_classes >= 2, "model.num_classes",
                "must be >= 2, got " + std::to_string(m.num_classes));
  check.require(!m.hidden.empty(), "model.hidden", "must list at least one layer width");
  for (int w : m.hidden) check.require(w > 0, "model.hidden", "layer widths must be positive");
  check.require(m.dropout >= 0 && m.dropout < 1, "model.dropout", "must be in [0, 1)");
  check.require(!m.zero_init_residual || m.name.rfind("resnet", 0) == 0,
                "model.zero_init_residual", "applies to the resnet models only, not " + m.name);
  check.require(m.memory_format != "channels_last" || spec.device != DevicePreference::kCpu, "model.memory_format",
                "channels_last is a GPU layout: with device cpu, oneDNN picks its own layouts");
  if (m.batchnorm == "folded" || m.batchnorm == "folded_inner") {
    const std::string& value = m.batchnorm;
    check.require(spec.device != DevicePreference::kCpu, "model.batchnorm",
                  value + " is a GPU's (cuDNN graphs): with device cpu, oneDNN runs each BatchNorm");
    check.require(spec.precision == Precision::kAmpFp16 || spec.precision == Precision::kAmpBf16, "model.batchnorm",
                  value + " needs 16-bit activations (precision amp-fp16 or amp-bf16), not " +
                      to_string(spec.precision));
    check.require(m.memory_format != "nchw", "model.batchnorm",
                  value + " needs the channels_last layout, not model.memory_format nchw");
  }
  if (m.grad_sum == "fused") {
    check.require(spec.device != DevicePreference::kCpu, "model.grad_sum",
                  "fused is a GPU's (cuDNN graphs): with device cpu, oneDNN sums the gradients");
    check.require(spec.precision == Precision::kAmpFp16 || spec.precision == Precision::kAmpBf16, "model.grad_sum",
                  "fused needs 16-bit activations (precision amp-fp16 or amp-bf16), not " + to_string(spec.precision));
    check.require(m.memory_format != "nchw", "model.grad_sum",
                  "fused needs the channels_last layout, not model.memory_format nchw");
  }
}

// The CTR models' keys (docs/ctr.md), and the image models' refusal of CTR-only choices.
void check_ctr_keys(const JobSpec& spec, const RangeChecker& check) {
  const ModelSpec& m = spec.model;
  const bool ctr = is_ctr_model(m.name);
  const OptimizerKind opt = spec.optimizer.name;
  if (!ctr) {
    check.require(spec.data.format != DataFormat::kLibsvm, "data.format",
                  "libsvm holds sparse features, which the CTR models read (model.name: deepfm, fm or lr), not " +
                      m.name);
    check.require(spec.distributed.embedding_exchange == "auto", "distributed.embedding_exchange",
                  spec.distributed.embedding_exchange + " chooses how a CTR model's table rows travel; " + m.name +
                      " has no embedding table");
    check.require(m.embedding_sharding == "replicated", "model.embedding_sharding",
                  m.embedding_sharding + " shares a CTR model's table between the ranks; " + m.name +
                      " has no embedding table");
    check.require(spec.data.load == "auto", "data.load",
                  spec.data.load + " chooses how a CTR model's samples are read; " + m.name +
                      "'s sets are streamed or read by offset as their format says (data.format)");
    check.require(opt != OptimizerKind::kAdagrad && opt != OptimizerKind::kFtrl, "optimizer.name",
                  to_string(opt) + " is a CTR model's optimizer (deepfm, fm, lr); " + m.name +
                      " takes sgd, adam, adamw, lars or lamb");
    return;
  }
  check.require(m.fields > 0, "model.fields",
                "must be the number of ids per sample (the sample's field_size), got " + std::to_string(m.fields));
  check.require(m.table_rows > 0, "model.table_rows",
                "must be the embedding tables' rows (the sample's feature_size; every id is below it), got " +
                    std::to_string(m.table_rows));
  check.require(m.embedding_size > 0 || m.name == "lr", "model.embedding_size",
                "must be positive, got " + std::to_string(m.embedding_size));
  check.require(m.l2 >= 0, "model.l2", "must be >= 0");
  check.require(!m.batch_norm || m.name == "deepfm", "model.batch_norm", "applies to deepfm's MLP only, not " + m.name);
  check.require(m.batch_norm_decay >= 0 && m.batch_norm_decay < 1, "model.batch_norm_decay", "must be in [0, 1)");
  const DataFormat f = spec.data.format;
  check.require(f == DataFormat::kLibsvm || f == DataFormat::kTfrecord || f == DataFormat::kSynthetic, "data.format",
                m.name + " reads sparse features: libsvm, tfrecord (label, ids, values) or synthetic, not " +
                    to_string(f));
  check.require(f != DataFormat::kSynthetic || spec.data.load != "stream", "data.load",
                "stream reads files; the synthetic set is generated per sample (use auto or memory)");
  check.require(spec.device != DevicePreference::kCuda, "device",
                m.name + " trains on the CPU (its GPU path is not built yet): use device cpu or auto");
  check.require(spec.precision == Precision::kFp32, "precision", m.name + " trains in fp32");
  check.require(opt != OptimizerKind::kLars && opt != OptimizerKind::kLamb && opt != OptimizerKind::kAdamW,
                "optimizer.name",
                to_string(opt) + " is not a sparse optimizer: " + m.name + " takes adam, adagrad, ftrl or sgd");
  check.require(spec.optimizer.initial_accumulator >= 0, "optimizer.initial_accumulator", "must be >= 0");
  check.require(spec.optimizer.l1 >= 0, "optimizer.l1", "must be >= 0");
  check.require(spec.train.accumulate_steps == 1, "train.accumulate_steps",
                m.name + " takes one batch per step: raise data.batch_size instead");
  check.require(spec.data.synthetic.zipf > 0, "data.synthetic.zipf", "must be > 0");
  check.require(!spec.data.ids_key.empty(), "data.ids_key", "must name the Example's int64 ids feature");
  check.require(!spec.data.values_key.empty(), "data.values_key", "must name the Example's float values feature");
}

// data.*
void check_data_keys(const JobSpec& spec, const RangeChecker& check) {
  const DataSpec& d = spec.data;
  check.require(d.batch_size > 0, "data.batch_size",
                "must be a positive integer, got " + std::to_string(d.batch_size));
  check.require(d.prefetch >= 0, "data.prefetch", "must be >= 0");
  if (d.format != DataFormat::kSynthetic) {
    check.require(!d.train.empty(), "data.train", "must name the training data directory");
    check.require(!d.test.empty(), "data.test", "must name the test data directory");
  }
  check.require(d.synthetic.train_samples > 0, "data.synthetic.train_samples", "must be positive");
  check.require(d.synthetic.test_samples > 0, "data.synthetic.test_samples", "must be positive");
  check.require(d.synthetic.channels > 0, "data.synthetic.channels", "must be positive");
  check.require(d.synthetic.height > 0, "data.synthetic.height", "must be positive");
  check.require(d.synthetic.width > 0, "data.synthetic.width", "must be positive");
  check.require(d.synthetic.noise >= 0, "data.synthetic.noise", "must be >= 0");
  check.require(d.image_size >= 1, "data.image_size", "must be a positive number of pixels");
  check.require(d.resize >= d.image_size, "data.resize",
                "must be >= data.image_size (" + std::to_string(d.image_size) + "): the centre crop is cut from it");
  check.require(d.workers >= 0, "data.workers", "must be >= 0 (0: the rank's compute threads)");
  check.require(d.decode != DecodeChoice::kGpu || is_encoded_images(d.format), "data.decode",
                "gpu decodes the JPEGs of tfrecord, tar-shards and image-folder; data.format " + to_string(d.format) +
                    " has none (use auto or cpu)");
  check.require(d.normalize_on != "gpu" || d.decode != DecodeChoice::kCpu, "data.normalize_on",
                "gpu normalises in the GPU decoder's kernel, but data.decode is cpu (use data.decode: gpu or auto, "
                "or data.normalize_on: cpu)");
  check.require(d.decode_roi != "on" || d.decode != DecodeChoice::kCpu, "data.decode_roi",
                "on decodes regions with nvJPEG on the GPU, but data.decode is cpu (use data.decode: gpu or auto, "
                "or data.decode_roi: off)");
  check.require(d.nvjpeg_backend == "auto" || d.decode != DecodeChoice::kCpu, "data.nvjpeg_backend",
                d.nvjpeg_backend + " picks nvJPEG's backend on the GPU, but data.decode is cpu (use data.decode: gpu "
                "or auto, or data.nvjpeg_backend: auto)");
  check.require(d.shuffle_buffer >= 0, "data.shuffle_buffer", "must be >= 0 records (0: no shuffle buffer)");
  check.require(d.samples_per_epoch >= 0, "data.samples_per_epoch", "must be >= 0 (0: counted from the files)");
  check.require(!d.image_key.empty(), "data.image_key", "must name the Example's image feature");
  check.require(!d.label_key.empty(), "data.label_key", "must name the Example's label feature");
}

// train.*
void check_train_keys(const JobSpec& spec, const RangeChecker& check) {
  const TrainSpec& t = spec.train;
  check.require(t.epochs >= 0, "train.epochs", "must be >= 0");
  check.require(t.max_steps >= 0, "train.max_steps", "must be >= 0 (0 = no limit)");
  check.require(t.epochs > 0 || t.max_steps > 0, "train.epochs",
                "train.epochs and train.max_steps are both 0: there is nothing to train");
  check.require(t.accumulate_steps >= 1, "train.accumulate_steps",
                "must be >= 1 (micro-batches of data.batch_size per optimizer step), got " +
                    std::to_string(t.accumulate_steps));
  check.require(t.label_smoothing >= 0 && t.label_smoothing < 1, "train.label_smoothing",
                "must be in [0, 1), got " + std::to_string(t.label_smoothing));
  check.require(t.log_every > 0, "train.log_every", "must be a positive number of steps");
  check.require(t.eval_every_epochs >= 0, "train.eval_every_epochs", "must be >= 0");
  check.require(spec.train.cudnn_workspace_mb >= 0, "train.cudnn_workspace_mb", "must be >= 0 (MB of GPU memory)");
  check.require(t.cuda_graphs != "on" || spec.device != DevicePreference::kCpu, "train.cuda_graphs",
                "on records the GPU's step as a CUDA graph: with device cpu there is none (use off)");
}

// optimizer.*
void check_optimizer_keys(const JobSpec& spec, const RangeChecker& check) {
  const OptimizerSpec& o = spec.optimizer;
  check.require(o.lr > 0, "optimizer.lr", "must be > 0, got " + std::to_string(o.lr));
  check.require(o.capturable != "on" || spec.device != DevicePreference::kCpu, "optimizer.capturable",
                "on decides and applies a GPU's update on the device: with device cpu the update runs on the host "
                "(use off)");
  check.require(o.reference_batch >= 0, "optimizer.reference_batch",
                "must be a positive integer (the global batch optimizer.lr is stated for) or 0 "
                "(unset: data.batch_size), got " +
                    std::to_string(o.reference_batch));
  check.require(o.momentum >= 0 && o.momentum < 1, "optimizer.momentum", "must be in [0, 1)");
  check.require(!o.nesterov || o.momentum > 0, "optimizer.nesterov",
                "needs optimizer.momentum > 0");
  // Adam-like optimizers ignore momentum and nesterov; LARS has momentum, but not Nesterov's.
  check.require(!o.nesterov || o.name != OptimizerKind::kLars, "optimizer.nesterov",
                "lars has no Nesterov variant; set it to false");
  check.require(o.weight_decay >= 0, "optimizer.weight_decay", "must be >= 0");
  check.require(o.beta1 >= 0 && o.beta1 < 1, "optimizer.beta1", "must be in [0, 1)");
  check.require(o.beta2 >= 0 && o.beta2 < 1, "optimizer.beta2", "must be in [0, 1)");
  check.require(o.eps > 0, "optimizer.eps", "must be > 0");
  check.require(o.trust_coefficient > 0, "optimizer.trust_coefficient", "must be > 0");
  check.require(o.warmup_epochs >= 0, "optimizer.warmup_epochs", "must be >= 0");
  check.require(o.warmup_steps >= 0, "optimizer.warmup_steps", "must be >= 0");
  check.require(o.warmup_steps == 0 || o.warmup_epochs == 0, "optimizer.warmup_steps",
                "set either optimizer.warmup_epochs or optimizer.warmup_steps, not both");
  for (std::size_t i = 0; i < o.milestones.size(); ++i)
    check.require(o.milestones[i] > 0 && (i == 0 || o.milestones[i] > o.milestones[i - 1]),
                  "optimizer.milestones", "must be increasing positive epoch numbers");
  check.require(o.schedule != ScheduleKind::kStep || !o.milestones.empty(), "optimizer.schedule",
                "step needs at least one milestone epoch in optimizer.milestones");
  check.require(o.gamma > 0 && o.gamma <= 1, "optimizer.gamma", "must be in (0, 1]");
  check.require(o.min_lr >= 0 && o.min_lr < o.lr, "optimizer.min_lr",
                "must be in [0, optimizer.lr)");
}

// distributed.*
void check_distributed_keys(const JobSpec& spec, const RangeChecker& check) {
  const DistributedSpec& ds = spec.distributed;
  check.require(ds.bucket_mb >= 0 || ds.bucket_mb == kAutoBucketMb, "distributed.bucket_mb",
                "must be >= 0 (0 = one bucket) or auto");
  check.require(ds.ranks_per_node >= 0, "distributed.ranks_per_node",
                "must be 'auto' or a positive integer");
  check.require(ds.timeout_s > 0, "distributed.timeout_s", "must be > 0 seconds");
  check.require(ds.stream_ordered != "on" || spec.device != DevicePreference::kCpu, "distributed.stream_ordered",
                "on orders a GPU's gradient buckets on its streams: with device cpu they are reduced in host memory "
                "(use off)");
  check.require(ds.stall_warning_s > 0, "distributed.stall_warning_s", "must be > 0 seconds");
  check.require(ds.check_every_steps >= 0, "distributed.check_every_steps",
                "must be >= 0 (0 = off)");
}

// checkpoint.*
void check_checkpoint_keys(const JobSpec& spec, const RangeChecker& check) {
  const CheckpointSpec& c = spec.checkpoint;
  check.require(c.every_steps >= 0, "checkpoint.every_steps", "must be >= 0 (0 = only at the end)");
  check.require(c.keep_last >= 1, "checkpoint.keep_last", "must be >= 1");
  check.require(!c.resume.empty(), "checkpoint.resume", "must be auto, never or a checkpoint path");
}

}  // namespace

void validate_job_spec(const JobSpec& spec, const std::map<std::string, std::string>& sources) {
  const RangeChecker check(sources);
  check_job_keys(spec, check);
  check_model_keys(spec, check);
  check_ctr_keys(spec, check);
  check_data_keys(spec, check);
  check_train_keys(spec, check);
  check_optimizer_keys(spec, check);
  check_distributed_keys(spec, check);
  check_checkpoint_keys(spec, check);
  check_output_keys(spec, check);
}

}  // namespace sdp
