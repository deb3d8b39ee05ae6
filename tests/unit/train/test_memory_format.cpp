// model.memory_format: which jobs take the channels_last path (a GPU, 16-bit compute, the key
// asking for it) and what the plan says of each; likewise train.cuda_graphs.
#include <gtest/gtest.h>

#include <string>

#include "config/job_spec.hpp"
#include "data/images/nvjpeg_offload.hpp"
#include "train/training_setup.hpp"

namespace sdp {
namespace {

JobSpec job(Precision precision, const std::string& memory_format) {
  JobSpec spec;
  spec.precision = precision;
  spec.model.memory_format = memory_format;
  return spec;
}

TEST(MemoryFormat, ChannelsLastOnAGpuIn16BitsOrWhenAsked) {
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  EXPECT_TRUE(uses_channels_last(job(Precision::kAmpFp16, "channels_last"), gpu));
  EXPECT_TRUE(uses_channels_last(job(Precision::kAmpBf16, "channels_last"), gpu));
  EXPECT_TRUE(uses_channels_last(job(Precision::kAmpFp16, "auto"), gpu)) << "the default for 16-bit on a GPU";
  EXPECT_TRUE(uses_channels_last(job(Precision::kAmpBf16, "auto"), gpu));
  EXPECT_FALSE(uses_channels_last(job(Precision::kAmpFp16, "nchw"), gpu)) << "the key still selects the old path";
  EXPECT_FALSE(uses_channels_last(job(Precision::kFp32, "auto"), gpu)) << "f32 NHWC without TF32 is slower";
  EXPECT_TRUE(uses_channels_last(job(Precision::kFp32, "channels_last"), gpu));
  EXPECT_TRUE(uses_channels_last(job(Precision::kTf32, "channels_last"), gpu));
  EXPECT_TRUE(uses_channels_last(job(Precision::kTf32, "auto"), gpu)) << "tf32's default since an H100 checked it";
  EXPECT_FALSE(uses_channels_last(job(Precision::kTf32, "nchw"), gpu));
  EXPECT_FALSE(uses_channels_last(job(Precision::kAmpFp16, "channels_last"), cpu));
}

TEST(MemoryFormat, ThePlanSaysWhichLayoutAndWhy) {
  const Device gpu = Device::cuda(0);
  EXPECT_EQ(describe_memory_format(job(Precision::kAmpFp16, "channels_last"), gpu).rfind("channels_last: NHWC", 0), 0u);
  EXPECT_EQ(describe_memory_format(job(Precision::kAmpFp16, "nchw"), gpu).rfind("nchw: NCHW", 0), 0u);
  EXPECT_EQ(describe_memory_format(job(Precision::kAmpBf16, "auto"), gpu).rfind("channels_last (auto): NHWC", 0), 0u);
  EXPECT_EQ(describe_memory_format(job(Precision::kFp32, "auto"), gpu),
            "nchw (auto): fp32 computes NCHW (cuDNN's f32 NHWC convolutions are slower without TF32); "
            "model.memory_format: channels_last takes NHWC");
  EXPECT_EQ(describe_memory_format(job(Precision::kTf32, "auto"), gpu).rfind("channels_last (auto): NHWC", 0), 0u);
  EXPECT_EQ(describe_memory_format(job(Precision::kAmpFp16, "auto"), Device::cpu()), "oneDNN's own layouts (CPU)");
}

// model.memory_plan: auto shares one arena on both devices (on a GPU since an H100 run
// checked it, 2026-11-26); either key forces its way anywhere.
TEST(MemoryPlan, SharedUnderAutoOnBothDevices) {
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  JobSpec spec;
  EXPECT_EQ(spec.model.memory_plan, "auto");
  EXPECT_TRUE(uses_memory_plan(spec, cpu));
  EXPECT_TRUE(uses_memory_plan(spec, gpu));
  EXPECT_EQ(describe_memory_plan(spec, cpu),
            "shared (auto): backward's buffers in one arena, each reused once its last reader has run");
  EXPECT_EQ(describe_memory_plan(spec, gpu),
            "shared (auto): the layers' outputs and backward's buffers in one arena, each reused once its last "
            "reader has run");
  spec.model.memory_plan = "shared";
  EXPECT_TRUE(uses_memory_plan(spec, gpu));
  EXPECT_EQ(describe_memory_plan(spec, gpu),
            "shared: the layers' outputs and backward's buffers in one arena, each reused once its last reader has "
            "run");
  EXPECT_FALSE(uses_lean_memory_plan(spec, gpu));
  spec.model.memory_plan = "per_layer";
  EXPECT_FALSE(uses_memory_plan(spec, cpu));
  EXPECT_FALSE(uses_memory_plan(spec, gpu));
  EXPECT_EQ(describe_memory_plan(spec, cpu), "per_layer: every layer keeps its own");
}

// model.memory_plan: lean is the shared arena keeping an output for backward only where
// backward reads it: a GPU's way (the CPU layers own their outputs), so the CPU shares and says so.
TEST(MemoryPlan, LeanIsTheSharedArenaOnAGpuOnly) {
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  JobSpec spec;
  spec.model.memory_plan = "lean";
  EXPECT_TRUE(uses_memory_plan(spec, gpu));
  EXPECT_TRUE(uses_lean_memory_plan(spec, gpu));
  EXPECT_EQ(describe_memory_plan(spec, gpu),
            "lean: the layers' outputs, backward's buffers and cuDNN's workspaces in one arena, each reused once its "
            "last reader has run; an output backward does not read (a BatchNorm's without its ReLU) is not kept for it");
  EXPECT_TRUE(uses_memory_plan(spec, cpu));
  EXPECT_FALSE(uses_lean_memory_plan(spec, cpu));
  EXPECT_EQ(describe_memory_plan(spec, cpu),
            "shared (lean is a GPU's): backward's buffers in one arena, each reused once its last reader has run");
}

// model.batchnorm: folded runs the BatchNorms between two convolutions inside them on a GPU in
// 16 bits, channels_last; auto stays separate until a GPU run has checked the folded path; the
// plan says which, and why not where folded cannot run.
TEST(BatchNormFolding, OptInOnAGpuIn16BitsChannelsLast) {
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  JobSpec spec = job(Precision::kAmpFp16, "auto");
  EXPECT_EQ(spec.model.batchnorm, "auto");
  EXPECT_FALSE(folds_batchnorm(spec, gpu)) << "opt-in until a GPU run has checked it";
  EXPECT_EQ(describe_batchnorm(spec, gpu),
            "separate (auto): each BatchNorm a pass of its own; model.batchnorm: folded runs them inside the "
            "convolutions (opt-in until a GPU run has checked it)");
  spec.model.batchnorm = "folded";
  EXPECT_TRUE(folds_batchnorm(spec, gpu));
  EXPECT_EQ(describe_batchnorm(spec, gpu).rfind("folded: each BatchNorm with its ReLU between two convolutions", 0),
            0u);
  EXPECT_TRUE(folds_residual_batchnorm(spec, gpu)) << "folded: each branch's last BatchNorm, with its sum, too";
  EXPECT_NE(describe_batchnorm(spec, gpu).find("each branch's last, with its block's sum, takes its statistics"),
            std::string::npos);
  JobSpec inner = spec;
  inner.model.batchnorm = "folded_inner";
  EXPECT_TRUE(folds_batchnorm(inner, gpu));
  EXPECT_FALSE(folds_residual_batchnorm(inner, gpu)) << "folded_inner: only those between two convolutions";
  EXPECT_NE(describe_batchnorm(inner, gpu).find("each branch's last stays cuDNN's BatchNorm with the block's sum"),
            std::string::npos);
  EXPECT_TRUE(folds_batchnorm(job(Precision::kAmpBf16, "channels_last"), gpu) == false) << "the key is not set";
  JobSpec bf16 = job(Precision::kAmpBf16, "channels_last");
  bf16.model.batchnorm = "folded";
  EXPECT_TRUE(folds_batchnorm(bf16, gpu));
  EXPECT_FALSE(folds_batchnorm(spec, cpu));
  EXPECT_EQ(describe_batchnorm(spec, cpu), "separate (oneDNN, CPU)");
  spec.model.memory_format = "nchw";
  EXPECT_FALSE(folds_batchnorm(spec, gpu)) << "folding needs NHWC";
  EXPECT_EQ(describe_batchnorm(spec, gpu),
            "separate: each BatchNorm a pass of its own; folded needs 16-bit activations in the channels_last layout");
  JobSpec tf32 = job(Precision::kTf32, "auto");
  tf32.model.batchnorm = "folded";
  EXPECT_FALSE(folds_batchnorm(tf32, gpu)) << "folding is built for 16-bit activations";
  EXPECT_FALSE(folds_residual_batchnorm(tf32, gpu));
  spec.model.batchnorm = "separate";
  spec.model.memory_format = "auto";
  EXPECT_FALSE(folds_batchnorm(spec, gpu));
}

// model.grad_sum: fused sums each residual block's input gradient in its first convolution's pass
// on a GPU in 16 bits, channels_last; auto stays separate until a GPU run has checked it.
TEST(GradSumFusion, OptInOnAGpuIn16BitsChannelsLast) {
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  JobSpec spec = job(Precision::kAmpFp16, "auto");
  EXPECT_EQ(spec.model.grad_sum, "auto");
  EXPECT_FALSE(fuses_grad_sum(spec, gpu)) << "opt-in until a GPU run has checked it";
  EXPECT_EQ(describe_grad_sum(spec, gpu),
            "separate (auto): each residual block sums its input gradients in a pass of its own; model.grad_sum: fused "
            "sums them in the convolution's pass (opt-in until a GPU run has checked it)");
  spec.model.grad_sum = "fused";
  EXPECT_TRUE(fuses_grad_sum(spec, gpu));
  EXPECT_EQ(
      describe_grad_sum(spec, gpu).rfind("fused: each residual block's input gradient adds its shortcut's term", 0), 0u);
  EXPECT_FALSE(fuses_grad_sum(spec, cpu));
  EXPECT_EQ(describe_grad_sum(spec, cpu), "separate (oneDNN, CPU)");
  spec.model.memory_format = "nchw";
  EXPECT_FALSE(fuses_grad_sum(spec, gpu)) << "the sum in the pass needs NHWC";
  EXPECT_EQ(describe_grad_sum(spec, gpu),
            "separate: each residual block sums its input gradients in a pass of its own; fused needs 16-bit "
            "activations in the channels_last layout");
  JobSpec tf32 = job(Precision::kTf32, "auto");
  tf32.model.grad_sum = "fused";
  EXPECT_FALSE(fuses_grad_sum(tf32, gpu));
}

// train.loss_read: auto reads the loss at the step's end on both devices (on a GPU since an
// H100 run checked it, 2026-11-26; on the CPU the same computation, no wait to save).
TEST(LossRead, StepEndUnderAutoOnBothDevices) {
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  JobSpec spec;
  EXPECT_EQ(spec.train.loss_read, "auto");
  EXPECT_TRUE(reads_loss_at_step_end(spec, gpu));
  EXPECT_TRUE(reads_loss_at_step_end(spec, cpu));
  EXPECT_EQ(describe_loss_read(spec, gpu).rfind("step_end (auto): the host queues backward while forward runs", 0),
            0u);
  EXPECT_EQ(describe_loss_read(spec, cpu), "as computed (CPU)");
  spec.train.loss_read = "step_end";
  EXPECT_TRUE(reads_loss_at_step_end(spec, gpu));
  EXPECT_EQ(describe_loss_read(spec, gpu).rfind("step_end: the host queues backward while forward runs", 0), 0u);
  spec.train.loss_read = "forward";
  EXPECT_FALSE(reads_loss_at_step_end(spec, gpu));
  EXPECT_FALSE(reads_loss_at_step_end(spec, cpu));
  EXPECT_EQ(describe_loss_read(spec, gpu), "forward: the host waits for each forward's loss before queuing backward");
}

// data.batch_type: auto loads a 16-bit channels_last model's own input (f16/bf16 NHWC) from
// encoded images (checked on an H100, 2026-11-26); f32 keeps the cast on the GPU; other models
// and formats load f32 whatever the key.
TEST(BatchType, ComputeUnderAutoFor16BitChannelsLastModels) {
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  JobSpec spec = job(Precision::kAmpFp16, "auto");
  spec.data.format = DataFormat::kImageFolder;
  EXPECT_TRUE(loads_compute_batches(spec, gpu));
  EXPECT_EQ(describe_batch_type(spec, gpu).rfind("compute (auto): f16 NHWC", 0), 0u);
  EXPECT_FALSE(loads_compute_batches(spec, cpu));
  spec.data.batch_type = "f32";
  EXPECT_FALSE(loads_compute_batches(spec, gpu));
  spec.data.batch_type = "auto";
  spec.model.memory_format = "nchw";
  EXPECT_FALSE(loads_compute_batches(spec, gpu));
  EXPECT_FALSE(loads_compute_batches(job(Precision::kFp32, "auto"), gpu));
  JobSpec synthetic = job(Precision::kAmpFp16, "auto");
  EXPECT_FALSE(loads_compute_batches(synthetic, gpu)) << "no encoded images to normalise";
}

// data.decode: auto decodes JPEGs with nvJPEG where the rank computes on a GPU and nvJPEG
// loads (checked on an H100, 2026-11-26); the keys force their way.
TEST(Decode, GpuUnderAutoWhereAGpuAndNvjpegAre) {
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  JobSpec spec;
  spec.data.format = DataFormat::kTarShards;
  EXPECT_EQ(decodes_on_gpu(spec, gpu), nvjpeg_status().available);
  EXPECT_FALSE(decodes_on_gpu(spec, cpu));
  spec.data.decode = DecodeChoice::kCpu;
  EXPECT_FALSE(decodes_on_gpu(spec, gpu));
  spec.data.decode = DecodeChoice::kGpu;
  EXPECT_TRUE(decodes_on_gpu(spec, gpu));
  JobSpec synthetic;
  EXPECT_FALSE(decodes_on_gpu(synthetic, gpu)) << "no JPEGs";
}

// data.normalize_on: auto normalises in nvJPEG's kernel wherever the JPEGs decode on the GPU
// (checked on an H100, 2026-11-27); cpu keeps the threads' way, and nothing normalises on a GPU
// that does not decode there.
TEST(NormalizeOn, GpuUnderAutoWhereTheGpuDecodes) {
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  JobSpec spec;
  spec.data.format = DataFormat::kImageFolder;
  spec.data.decode = DecodeChoice::kGpu;
  EXPECT_EQ(spec.data.normalize_on, "auto");
  EXPECT_TRUE(normalizes_on_gpu(spec, gpu));
  spec.data.normalize_on = "cpu";
  EXPECT_FALSE(normalizes_on_gpu(spec, gpu)) << "the key still selects the threads";
  spec.data.normalize_on = "auto";
  spec.data.decode = DecodeChoice::kCpu;
  EXPECT_FALSE(normalizes_on_gpu(spec, gpu));
  spec.data.decode = DecodeChoice::kAuto;
  EXPECT_FALSE(normalizes_on_gpu(spec, cpu));
}

// precision: tf32 and the train.* algorithm keys as the GPU layers get them, and the plan's line.
TEST(ComputeRules, FromTheJobSpec) {
  JobSpec spec;
  nn::ComputeRules rules = compute_rules(spec);
  EXPECT_FALSE(rules.tf32);
  EXPECT_TRUE(rules.deterministic);
  EXPECT_FALSE(rules.measure_algorithms);
  EXPECT_EQ(rules.workspace_limit, std::size_t{512} << 20);
  spec.precision = Precision::kTf32;
  spec.train.deterministic = false;
  spec.train.conv_algorithms = "measured";
  spec.train.cudnn_workspace_mb = 64;
  rules = compute_rules(spec);
  EXPECT_TRUE(rules.tf32);
  EXPECT_FALSE(rules.deterministic);
  EXPECT_TRUE(rules.measure_algorithms);
  EXPECT_EQ(rules.workspace_limit, std::size_t{64} << 20);
  EXPECT_EQ(compute_dtype(Precision::kTf32), DType::kF32) << "tf32 keeps f32 storage";
  EXPECT_TRUE(uses_channels_last(spec, Device::cuda(0))) << "tf32 takes NHWC by default";
  EXPECT_EQ(describe_compute_rules(spec, Device::cuda(0)),
            "f32 storage on TF32 tensor cores (cuDNN, cuBLAS); convolution algorithms any (not bitwise repeatable), "
            "timed by cuDNN, workspace <= 64 MB");
  EXPECT_EQ(describe_compute_rules(JobSpec{}, Device::cuda(0)),
            "f32, no TF32; convolution algorithms deterministic only, ranked by cuDNN's heuristics, workspace <= 512 "
            "MB");
  spec.model.memory_format = "nchw";
  EXPECT_EQ(describe_memory_format(spec, Device::cuda(0)),
            "nchw: NCHW, the residual sum and ReLU in one pass; model.memory_format: channels_last is the fused NHWC "
            "path");
}

// train.cuda_graphs: auto records a GPU job's steps (checked on an H100, 2026-11-27), never a
// CPU job's; the plan says which way the steps go, and what keeps a job's from being recorded.
TEST(CudaGraphs, AutoRecordsAGpuJobsStepsAndThePlanSaysWhyNot) {
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  JobSpec spec;
  EXPECT_EQ(spec.train.cuda_graphs, "auto") << "the default";
  EXPECT_TRUE(wants_cuda_graphs(spec, gpu));
  EXPECT_FALSE(wants_cuda_graphs(spec, cpu));
  EXPECT_EQ(describe_cuda_graphs(spec, gpu, 1).rfind("on (auto): forward and backward recorded once", 0), 0u);
  EXPECT_EQ(describe_cuda_graphs(spec, cpu, 1), "off (CPU)");
  EXPECT_EQ(describe_cuda_graphs(spec, gpu, 2).rfind("on (auto), but the steps run as launches: the gradients are "
                                                     "reduced across ranks",
                                                     0),
            0u);
  EXPECT_NE(describe_cuda_graphs(spec, gpu, 2).find("train.cuda_graphs: on records the forward alone"),
            std::string::npos);
  spec.train.accumulate_steps = 2;
  EXPECT_NE(describe_cuda_graphs(spec, gpu, 1).find("train.accumulate_steps"), std::string::npos);
  spec.train.accumulate_steps = 1;
  spec.model.dropout = 0.5;
  EXPECT_NE(describe_cuda_graphs(spec, gpu, 1).find("model.dropout"), std::string::npos);
  spec.model.dropout = 0;
  spec.train.loss_read = "forward";
  EXPECT_NE(describe_cuda_graphs(spec, gpu, 1).find("train.loss_read: forward"), std::string::npos);
  spec.train.loss_read = "auto";
  spec.train.cuda_graphs = "off";
  EXPECT_FALSE(wants_cuda_graphs(spec, gpu));
  EXPECT_EQ(describe_cuda_graphs(spec, gpu, 1).rfind("off: each step's kernels are launched one by one", 0), 0u);
  spec.train.cuda_graphs = "on";
  EXPECT_TRUE(wants_cuda_graphs(spec, gpu));
  EXPECT_EQ(describe_cuda_graphs(spec, gpu, 1).rfind("on: forward and backward", 0), 0u);
  EXPECT_EQ(describe_cuda_graphs(spec, gpu, 2).rfind("on: forward recorded once (the third step after a new batch "
                                                     "shape or an evaluation) and replayed, backward launched: the "
                                                     "gradients are reduced across ranks",
                                                     0),
            0u);
  EXPECT_EQ(describe_cuda_graphs(spec, cpu, 1), "on, but the steps run as launches: this rank computes on the CPU");
}

// optimizer.capturable: on decides and applies the update on the device for one micro-batch a
// step, on one GPU rank or several whose buckets are stream-ordered; auto keeps the host's
// decision until a GPU run has checked it, and the plan says which, and why not where on cannot
// apply.
TEST(CapturableUpdateChoice, OnTheDeviceWhenAskedForOneGpuRankOrStreamOrderedBuckets) {
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  JobSpec spec;
  EXPECT_FALSE(uses_capturable_update(spec, gpu, 1)) << "auto stays on the host";
  EXPECT_NE(describe_update(spec, gpu, 1).find("optimizer.capturable: on decides it on the device"), std::string::npos);
  EXPECT_EQ(describe_update(spec, cpu, 1), "on the host (CPU)");
  spec.optimizer.capturable = "on";
  EXPECT_TRUE(uses_capturable_update(spec, gpu, 1));
  EXPECT_FALSE(uses_capturable_update(spec, cpu, 1));
  EXPECT_EQ(describe_update(spec, gpu, 1).rfind("on the device (optimizer.capturable: on)", 0), 0u);
  EXPECT_NE(describe_update(spec, gpu, 1).find("recorded with forward and backward"), std::string::npos);
  spec.train.cuda_graphs = "off";
  EXPECT_NE(describe_update(spec, gpu, 1).find("launched after backward (train.cuda_graphs: off)"), std::string::npos);
  EXPECT_FALSE(uses_capturable_update(spec, gpu, 2)) << "across ranks only after stream-ordered buckets";
  EXPECT_NE(describe_update(spec, gpu, 2).find("on several ranks with distributed.stream_ordered: on"),
            std::string::npos);
  spec.distributed.stream_ordered = "on";
  EXPECT_TRUE(uses_capturable_update(spec, gpu, 2));
  EXPECT_NE(describe_update(spec, gpu, 2).find("the averaged gradients checked there"), std::string::npos);
  spec.distributed.stream_ordered = "auto";
  spec.train.accumulate_steps = 2;
  EXPECT_FALSE(uses_capturable_update(spec, gpu, 1));
  spec.train.accumulate_steps = 1;
  spec.optimizer.capturable = "off";
  EXPECT_FALSE(uses_capturable_update(spec, gpu, 1));
}

// distributed.stream_ordered: on lets several GPU ranks record backward with its buckets; auto
// keeps the communication thread (and the steps launched or the forward alone recorded) until a
// GPU run has checked it; micro-batch sums keep it off.
TEST(StreamOrderedChoice, SeveralGpuRanksRecordTheirBucketsWhenAsked) {
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  JobSpec spec;
  EXPECT_FALSE(orders_buckets_on_streams(spec, gpu));
  EXPECT_NE(describe_cuda_graphs(spec, gpu, 2).find("distributed.stream_ordered: on orders them on the GPU's streams"),
            std::string::npos);
  spec.distributed.stream_ordered = "on";
  EXPECT_TRUE(orders_buckets_on_streams(spec, gpu));
  EXPECT_FALSE(orders_buckets_on_streams(spec, cpu));
  EXPECT_EQ(describe_cuda_graphs(spec, gpu, 2).rfind("on (auto): forward, backward and the gradient buckets' NCCL "
                                                     "calls (distributed.stream_ordered: on) recorded once",
                                                     0),
            0u);
  EXPECT_EQ(describe_cuda_graphs(spec, gpu, 1).rfind("on (auto): forward and backward recorded once", 0), 0u);
  spec.train.accumulate_steps = 2;
  EXPECT_FALSE(orders_buckets_on_streams(spec, gpu));
  EXPECT_NE(describe_cuda_graphs(spec, gpu, 2).find("reduced across ranks"), std::string::npos);
}

}  // namespace
}  // namespace sdp
