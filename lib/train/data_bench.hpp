// `sdp-train bench data --config JOB`: the input side alone, as the trainer builds it (the
// job's data.format, transforms, batch size and prefetch), timed over a number of batches for
// each decoding worker count. No model, no MPI: what the loader can feed one rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "data/images/nvjpeg_offload.hpp"

namespace sdp {

struct DataBenchRow {
  std::string format;
  int workers = 0;
  int64_t images = 0;
  double seconds = 0;
  double images_per_sec = 0;
  // With GPU decoding: the decoder thread's time per batch, by phase (nvjpeg_offload.hpp).
  NvjpegPhaseTotals nvjpeg;
};

// Throws InputError for a bad data set or worker count.
std::vector<DataBenchRow> run_data_benchmark(const JobSpec& spec, const std::vector<int>& workers, int64_t batches);
std::string format_data_bench(const std::vector<DataBenchRow>& rows, const JobSpec& spec);

}  // namespace sdp
