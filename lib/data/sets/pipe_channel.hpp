// SageMaker Pipe mode (docs/sagemaker.md): a channel's data arrives through named pipes
// <channel path>_0, <channel path>_1, ..., one per pass over the data (SageMaker makes the next
// when the last one has been read to its end), each carrying the channel's S3 objects back to
// back: for TFRecord files, one long stream of records; for tar shards, archives one after
// another (zero blocks between them are skipped).
//
// A FIFO can be read by one process only (SageMaker's guidance for Horovod: local workers must not
// share a channel). So on each host local rank 0 reads it, on a feeder thread, and deals the
// records round-robin to the host's ranks: its own through a queue, the others' through Unix
// domain sockets (abstract names, keyed by a token the ranks of the job share). The reader
// parses each sample (its label and encoded image), so a defect is reported by one reader,
// naming the FIFO and the record, and raised on every rank of the host. With
// FullyReplicated every host's FIFO carries the whole set and host h keeps records k with
// k % hosts == h; with ShardedByS3Key each host's FIFO carries its own part, kept whole.
//
// Passes have no size known ahead: a training loader's steps per epoch come from data.samples_per_epoch,
// each rank reads on into the next pass when one ends, and a resumed job starts again at the
// new container's first FIFO. A FIFO that does not appear within the timeout, or whose stream
// ends inside a record, is an InputError naming it, raised on every rank of the host.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "data/sets/stream_source.hpp"
#include "data/loading/stream_loader.hpp"

namespace sdp {

struct PipeOptions {
  std::string path;  // the channel's path: its FIFOs are path_0, path_1, ...
  int local_rank = 0, local_size = 1;
  int host = 0, hosts = 1;
  bool host_sharded = false;  // ShardedByS3Key: this host's FIFO carries its own part
  std::string token;          // the same on every rank of the job, another in each job
  std::string role = "train";  // keeps the sockets of a job's channels apart (train, test)
  double timeout_s = 600;     // for a FIFO to appear, for the ranks of a host to connect
  StreamSourceOptions records;  // the format (tfrecord or tar-shards) and its keys
  int64_t first_pass = 0;       // the FIFO read first
  int64_t passes = -1;          // how many FIFOs the host's reader reads; -1: until stopped
};

// The path of the FIFO of pass `pass`.
std::string pipe_fifo_path(const std::string& channel, int64_t pass);

class PipeRecords final : public RankRecords {
 public:
  // Local rank 0 starts its feeder (connecting to the other local ranks); the others listen.
  // Throws RuntimeError when a socket cannot be made.
  explicit PipeRecords(const PipeOptions& options);
  ~PipeRecords() override;
  PipeRecords(const PipeRecords&) = delete;
  PipeRecords& operator=(const PipeRecords&) = delete;

  std::unique_ptr<ShardReader> open_pass(int64_t pass) override;
  int64_t pass_samples(int64_t) const override { return -1; }
  int64_t sample_id(const StreamedRecord& r) const override { return r.record.record; }
  std::string where(const StreamedRecord& r) const override;
  int64_t key_stride() const override { return int64_t{1} << 40; }
  void cancel() override;

  struct Shared;  // the state the feeder thread and the readers share (pipe_channel.cpp)

 private:
  PipeOptions options_;
  std::shared_ptr<Shared> shared_;
};

// A channel in Pipe mode. For training, its loader counts steps over the whole world (the
// records are dealt by host, then by local rank, whatever LoaderOptions' rank split says). For
// evaluation, each evaluation reads the channel's next FIFO to its end: every rank evaluates
// what its host's reader deals it, and the sums over the ranks cover the set once.
class PipeImageSet final : public SampleSource {
 public:
  // Training: throws InputError when samples_per_epoch < 1. Both: when the image options are
  // inconsistent. A test channel passes samples_per_epoch -1 (its size is unknown: count() -1).
  PipeImageSet(const PipeOptions& pipe, const EncodedImageOptions& images,
               int64_t samples_per_epoch, int64_t shuffle_buffer, int world_rank, int world_size);
  static std::unique_ptr<PipeImageSet> for_evaluation(const PipeOptions& pipe, const EncodedImageOptions& images);
  std::string name() const override {
    return std::string(stream_format_name(pipe_.records.format)) + " pipe:" + pipe_.path;
  }
  int64_t count() const override { return samples_per_epoch_; }
  int num_classes() const override { return images_.num_classes; }
  int channels() const override { return 3; }
  int height() const override { return images_.image_size; }
  int width() const override { return images_.image_size; }
  std::string describe() const override;
  // One per job: the host's reader of the FIFOs lives in it.
  std::unique_ptr<TrainLoader> make_train_loader(const LoaderOptions& options) const override;
  // Reads the next FIFO (the first evaluation _0, the next _1, ...); `rank` and `world` are
  // not used: the host's reader deals the records. Collective over the ranks of a host.
  std::unique_ptr<EvalLoader> make_eval_loader(int64_t batch_size, int rank, int world,
                                               int prefetch) const override;

 private:
  PipeImageSet(const PipeOptions& pipe, const EncodedImageOptions& images);  // for_evaluation
  PipeOptions pipe_;
  EncodedImageOptions images_;
  int64_t samples_per_epoch_, shuffle_buffer_;
  int world_rank_, world_size_;
  mutable int64_t evaluations_ = 0;  // the FIFO the next evaluation reads
};

}  // namespace sdp
