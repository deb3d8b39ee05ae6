// `sdp-train bench checkpoint --config JOB`: what one checkpoint of the job costs on this
// machine's disk. The job's model and optimizer state (built on the CPU, as rank 0's snapshot
// holds it) written with write_checkpoint (atomic: temporary file, fsync, rename) and read back
// with read_checkpoint (every check a resume runs), several times; medians. No MPI, no training.
#pragma once

#include <cstdint>
#include <string>

#include "config/job_spec.hpp"

namespace sdp {

struct CheckpointBenchOptions {
  int64_t repeat = 5;  // timed writes and reads
  std::string dir;     // where to write ("": the system's temp dir), in a directory made and removed there
};

struct CheckpointBenchResult {
  std::string model, optimizer, dir;
  int64_t tensors = 0;
  int64_t bytes = 0;            // the file's size
  int64_t repeat = 0;
  double write_seconds = 0;     // median write_checkpoint
  double read_seconds = 0;      // median read_checkpoint
  double checksum_seconds = 0;  // median CRC-32C of every tensor's bytes (part of both)
};

// Throws InputError for a job whose model cannot be built or bad options; RuntimeError when
// the directory cannot be written.
CheckpointBenchResult run_checkpoint_benchmark(const JobSpec& spec, const CheckpointBenchOptions& options);
std::string format_checkpoint_bench(const CheckpointBenchResult& result);

}  // namespace sdp
