// bench data's table, and the GPU decoder's line per batch where a row decoded on the GPU: what
// the phases took per batch, against the time between batches.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "train/data_bench.hpp"

namespace sdp {
namespace {

TEST(DataBench, PrintsTheGpuDecodersPhasesPerBatch) {
  JobSpec spec;
  spec.data.format = DataFormat::kImageFolder;
  spec.data.train = "/data/train";
  spec.data.batch_size = 256;
  DataBenchRow cpu{"image-folder", 2, 2560, 2.0, 1280.0, {}};
  DataBenchRow gpu{"image-folder", 2, 2560, 0.3, 2560 / 0.3, {}};
  gpu.nvjpeg = {0.050, 0.040, 0.010, 0.150, 10, 2560};
  const std::string table = format_data_bench({cpu, gpu}, spec);
  EXPECT_NE(table.find("image-folder          2       2560      2.00       1280\n"), std::string::npos) << table;
  EXPECT_NE(table.find("# nvJPEG thread, 2 worker(s), per batch of 256 images: headers and support 5.00 ms, decode "
                       "call 4.00 ms, kernels and copies queued 1.00 ms, waiting for the device 15.00 ms; a batch "
                       "every 30.00 ms\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("nvJPEG thread, 2 worker(s), per batch of 0"), std::string::npos) << "no line for the CPU row";
  EXPECT_EQ(format_data_bench({cpu}, spec).find("# nvJPEG"), std::string::npos);
}

TEST(DataBench, NvjpegPhaseTimesAddUp) {
  const NvjpegPhaseTotals before = nvjpeg_phase_totals();
  add_nvjpeg_phase_times({0.5, 0.25, 0.125, 1.0, 1, 64});
  add_nvjpeg_phase_times({0.5, 0.25, 0.125, 1.0, 1, 32});
  const NvjpegPhaseTotals after = nvjpeg_phase_totals();
  EXPECT_DOUBLE_EQ(after.inspect_s - before.inspect_s, 1.0);
  EXPECT_DOUBLE_EQ(after.decode_call_s - before.decode_call_s, 0.5);
  EXPECT_DOUBLE_EQ(after.queue_s - before.queue_s, 0.25);
  EXPECT_DOUBLE_EQ(after.wait_s - before.wait_s, 2.0);
  EXPECT_EQ(after.batches - before.batches, 2);
  EXPECT_EQ(after.images - before.images, 96);
}

}  // namespace
}  // namespace sdp
