// TensorBoard event files (output.tensorboard): rank 0's scalars by step, in the format
// TensorFlow's tf.summary and PyTorch's SummaryWriter write and TensorBoard reads. A file is
// TFRecord-framed (data/tfrecord.hpp's writer: length, masked CRC-32C, payload, masked CRC)
// serialized `Event` protos (tensorflow/core/util/event.proto), encoded here by hand:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// The first record is Event{wall_time, file_version: "brain.Event:2"}; then one Event per
// metric line, holding that line's scalars. Each is flushed when written, so a job that
// crashes leaves every record written before.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sdp {

class TfRecordWriter;

// TensorFlow's name for an event file: events.out.tfevents.<unix seconds, 10 digits>.<host>.
std::string tensorboard_file_name(int64_t unix_seconds, const std::string& host);

// The serialized protos (the writer's payloads; also for tests).
std::vector<uint8_t> encode_file_version_event(double wall_time);
std::vector<uint8_t> encode_scalars_event(double wall_time, int64_t step,
                                          const std::vector<std::pair<std::string, float>>& scalars);

// The TensorBoard tag of a metric (obs/metrics.hpp: the event kind and its key), or "" for the
// metrics that are not charted by step: "train" train_loss -> "train/loss", lr, images_per_sec,
// data_wait_ms, exposed_comm_ms -> "train/<key>"; "eval" test_loss, test_accuracy ->
// "test/loss", "test/accuracy".
std::string tensorboard_tag(const std::string& kind, const std::string& key);

class TensorBoardWriter {
 public:
  // Creates `dir` and a new event file in it (a name already taken gets a ".<n>" suffix) with
  // its file_version record. Throws RuntimeError naming the directory when it cannot.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One Event at `step` with these scalars, flushed to the file. A failed write is a warning,
  // once, after which nothing more is written: a full disk must not end a training run over
  // its charts.
  void add_scalars(int64_t step, const std::vector<std::pair<std::string, float>>& scalars);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<TfRecordWriter> writer_;  // null after a failed write
};

}  // namespace sdp
