// Metric output of rank 0: one line per event on stdout in the key=value form that a
// SageMaker metric_definitions regex reads, e.g.
//   [step 300] epoch=1 step=300 train_loss=0.1234 lr=0.04 images_per_sec=5123.4
// and the same values as one JSON object per line in metrics.jsonl (for plotting).
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace sdp {

class MetricsLog {
 public:
  // enabled = false on every rank but 0. jsonl_path "" = no file.
  MetricsLog(bool enabled, const std::string& jsonl_path);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // `tag` prefixes the line ("step 300", "epoch 2", "done"); `kind` names the event in JSON.
  // `words` (values that are names, e.g. lr_scaling=linear; no spaces) follow the numbers.
  void emit(const std::string& kind, const std::string& tag,
            const std::vector<std::pair<std::string, double>>& values,
            const std::vector<std::pair<std::string, std::string>>& words = {});

 private:
  bool enabled_;
  std::string path_;
  std::FILE* jsonl_ = nullptr;
};

}  // namespace sdp
