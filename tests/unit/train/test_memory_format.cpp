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

}  // namespace
}  // namespace sdp
