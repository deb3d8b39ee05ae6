// One door into a job's data: the train and test sets its data section names, opened for this
// rank, whatever the format (in memory, encoded images read by index, streamed shards, a
// SageMaker channel in Pipe mode). The trainer names no format: a new one is added here, in
// the stage folders and in docs/data-formats.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "config/job_spec.hpp"
#include "config/sagemaker_env.hpp"
#include "data/images/augment.hpp"
#include "data/images/jpeg_offload.hpp"
#include "data/sets/pipe_channel.hpp"
#include "data/sets/sample_set.hpp"

namespace sdp {

struct DataSplits {
  std::unique_ptr<SampleSource> train, test;
};

// Where this rank stands among the job's readers of data: what a training channel in SageMaker's
// Pipe mode needs (one reader of its FIFOs per host, dealing records to the host's ranks).
struct DataReaders {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;
  int host = 0, hosts = 1;
  std::string token;  // the same on every rank of a job (pipe_channel.hpp's sockets)
};

// What the data needs of the job besides its data section.
struct DataJob {
  int num_classes = 10;    // model.num_classes: bounds the labels of sets that do not know theirs
  uint64_t seed = 42;      // the synthetic sets' templates and samples
  int workers = 1;         // decoding threads when data.workers is 0
  double timeout_s = 600;  // distributed.timeout_s: how long a Pipe-mode reader waits for a FIFO
  // data.decode: gpu: makes each loader's JPEG offload (images/jpeg_offload.hpp); empty: the
  // CPU decodes.
  std::function<std::shared_ptr<JpegOffload>()> make_offload;
  // Encoded images' batches: f32 NCHW, or the model's 16-bit NHWC input (data.batch_type).
  DType batch_dtype = DType::kF32;
  bool batch_channels_last = false;
  bool normalize_on_offload = false;  // data.normalize_on: gpu (EncodedImageOptions)
};

// The threads of a loader of encoded images: data.workers, else the rank's compute threads;
// with the GPU decoding (data.decode: gpu) at most kGpuDecodeWorkers by default, since they
// only read, parse and draw the transforms.
constexpr int kGpuDecodeWorkers = 2;
int loader_workers(const DataSpec& data, int compute_threads, bool gpu_decode);

// The train and test splits `data` names (not collective: the caller agrees on errors). The
// training split is opened first, so that its errors are the ones reported. Throws InputError
// naming the file and key for a missing or corrupt set.
DataSplits open_data(const DataSpec& data, const DataJob& job, const DataReaders& readers = {});

// The FIFOs of the channel at `path` (in Pipe mode) as this rank reads them: one reader a host,
// each host its own part when the channel is ShardedByS3Key; records of `records`' format.
PipeOptions channel_pipe(const std::string& path, const ChannelConfig& channel, const DataReaders& readers,
                         double timeout_s, const StreamSourceOptions& records);

// data.augment as the loader applies it: crop-flip (and auto on cifar10) crops from a 4-pixel
// zero padding and flips; flip only flips (pad 0); none does neither.
AugmentOptions augment_options(const DataSpec& data);

}  // namespace sdp
