// model.memory_format: which jobs take the channels_last path (a GPU, 16-bit compute, the key
// asking for it) and what the plan says of each.
#include <gtest/gtest.h>

#include <string>

#include "config/job_spec.hpp"
#include "train/training_setup.hpp"

namespace sdp {
namespace {

JobSpec job(Precision precision, const std::string& memory_format) {
  JobSpec spec;
  spec.precision = precision;
  spec.model.memory_format = memory_format;
  return spec;
}

TEST(MemoryFormat, ChannelsLastOnlyOnAGpuIn16Bits) {
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  EXPECT_TRUE(uses_channels_last(job(Precision::kAmpFp16, "channels_last"), gpu));
  EXPECT_TRUE(uses_channels_last(job(Precision::kAmpBf16, "channels_last"), gpu));
  EXPECT_TRUE(uses_channels_last(job(Precision::kAmpFp16, "auto"), gpu)) << "the default for 16-bit on a GPU";
  EXPECT_TRUE(uses_channels_last(job(Precision::kAmpBf16, "auto"), gpu));
  EXPECT_FALSE(uses_channels_last(job(Precision::kAmpFp16, "nchw"), gpu)) << "the key still selects the old path";
  EXPECT_FALSE(uses_channels_last(job(Precision::kFp32, "auto"), gpu));
  EXPECT_FALSE(uses_channels_last(job(Precision::kFp32, "channels_last"), gpu));
  EXPECT_FALSE(uses_channels_last(job(Precision::kAmpFp16, "channels_last"), cpu));
}

TEST(MemoryFormat, ThePlanSaysWhichLayoutAndWhy) {
  const Device gpu = Device::cuda(0);
  EXPECT_EQ(describe_memory_format(job(Precision::kAmpFp16, "channels_last"), gpu).rfind("channels_last: NHWC", 0), 0u);
  EXPECT_EQ(describe_memory_format(job(Precision::kAmpFp16, "nchw"), gpu).rfind("nchw: NCHW", 0), 0u);
  EXPECT_EQ(describe_memory_format(job(Precision::kAmpBf16, "auto"), gpu).rfind("channels_last (auto): NHWC", 0), 0u);
  EXPECT_EQ(describe_memory_format(job(Precision::kFp32, "auto"), gpu), "nchw (auto): fp32 computes NCHW");
  EXPECT_EQ(describe_memory_format(job(Precision::kAmpFp16, "auto"), Device::cpu()), "oneDNN's own layouts (CPU)");
}

// model.memory_plan: shared is the CPU's way under auto; a GPU keeps per_layer under auto
// until a GPU run has checked the shared path; either key forces its way anywhere.
TEST(MemoryPlan, SharedOnTheCpuPerLayerOnAGpuUntilChecked) {
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  JobSpec spec;
  EXPECT_EQ(spec.model.memory_plan, "auto");
  EXPECT_TRUE(uses_memory_plan(spec, cpu));
  EXPECT_FALSE(uses_memory_plan(spec, gpu));
  EXPECT_EQ(describe_memory_plan(spec, cpu),
            "shared (auto): backward's buffers in one arena, each reused once its last reader has run");
  EXPECT_EQ(describe_memory_plan(spec, gpu),
            "per_layer (auto): every layer keeps its own; model.memory_plan: shared is the GPU's smaller path, "
            "awaiting a GPU run's check");
  spec.model.memory_plan = "shared";
  EXPECT_TRUE(uses_memory_plan(spec, gpu));
  EXPECT_EQ(describe_memory_plan(spec, gpu),
            "shared: the layers' outputs and backward's buffers in one arena, each reused once its last reader has "
            "run");
  spec.model.memory_plan = "per_layer";
  EXPECT_FALSE(uses_memory_plan(spec, cpu));
  EXPECT_EQ(describe_memory_plan(spec, cpu), "per_layer: every layer keeps its own");
}

// train.loss_read: a GPU keeps reading the loss after each forward under auto until a GPU run
// has checked step_end; the CPU takes step_end (the same computation, no wait to save).
TEST(LossRead, ForwardOnAGpuUntilCheckedStepEndOnTheCpu) {
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  JobSpec spec;
  EXPECT_EQ(spec.train.loss_read, "auto");
  EXPECT_FALSE(reads_loss_at_step_end(spec, gpu));
  EXPECT_TRUE(reads_loss_at_step_end(spec, cpu));
  EXPECT_EQ(describe_loss_read(spec, gpu),
            "forward (auto): the host waits for each forward's loss before queuing backward; train.loss_read: "
            "step_end waits once a step less, awaiting a GPU run's check");
  EXPECT_EQ(describe_loss_read(spec, cpu), "as computed (CPU)");
  spec.train.loss_read = "step_end";
  EXPECT_TRUE(reads_loss_at_step_end(spec, gpu));
  EXPECT_EQ(describe_loss_read(spec, gpu).rfind("step_end: the host queues backward while forward runs", 0), 0u);
  spec.train.loss_read = "forward";
  EXPECT_FALSE(reads_loss_at_step_end(spec, gpu));
  EXPECT_FALSE(reads_loss_at_step_end(spec, cpu));
  EXPECT_EQ(describe_loss_read(spec, gpu), "forward: the host waits for each forward's loss before queuing backward");
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
  EXPECT_FALSE(uses_channels_last(spec, Device::cuda(0))) << "channels_last is the 16-bit path";
  EXPECT_EQ(describe_compute_rules(spec, Device::cuda(0)),
            "f32 storage on TF32 tensor cores (cuDNN, cuBLAS); convolution algorithms any (not bitwise repeatable), "
            "timed by cuDNN, workspace <= 64 MB");
  EXPECT_EQ(describe_compute_rules(JobSpec{}, Device::cuda(0)),
            "f32, no TF32; convolution algorithms deterministic only, ranked by cuDNN's heuristics, workspace <= 512 "
            "MB");
  EXPECT_EQ(describe_memory_format(spec, Device::cuda(0)), "nchw (auto): tf32 computes NCHW");
}

}  // namespace
}  // namespace sdp
