// Metric output of rank 0: one line per event on stdout in the key=value form that a
// SageMaker metric_definitions regex reads, e.g.
//   [step 300] epoch=1 step=300 train_loss=0.1234 lr=0.04 images_per_sec=5123.4
// and the same values as one JSON object per line in metrics.jsonl (for plotting), and the
// charted ones (obs/tensorboard.hpp's tensorboard_tag) as TensorBoard scalars at their step.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sdp {

class TensorBoardWriter;

class MetricsLog {
 public:
  // enabled = false on every rank but 0. jsonl_path "" = no file; tensorboard_dir "" = no
  // event file. Throws RuntimeError when the event file cannot be created.
  MetricsLog(bool enabled, const std::string& jsonl_path, const std::string& tensorboard_dir = "");
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // `tag` prefixes the line ("step 300", "epoch 2", "done"); `kind` names the event in JSON.
  // `words` (values that are names, e.g. lr_scaling=linear; no spaces) follow the numbers.
  // An event with a "step" value also goes to TensorBoard, at that step.
  // The JSON file is opened at the first event (RuntimeError when it cannot be).
  void emit(const std::string& kind, const std::string& tag,
            const std::vector<std::pair<std::string, double>>& values,
            const std::vector<std::pair<std::string, std::string>>& words = {});
  // Before the first event: add to an existing JSON file instead of replacing it (a resumed
  // run continues the records of the runs before it).
  void continue_file() { append_ = true; }

 private:
  bool enabled_;
  std::string path_;
  bool append_ = false;
  std::FILE* jsonl_ = nullptr;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
};

}  // namespace sdp
