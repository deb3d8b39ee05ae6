#include "obs/metrics.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/log.hpp"
#include "obs/tensorboard.hpp"

namespace sdp {

MetricsLog::MetricsLog(bool enabled, const std::string& jsonl_path, const std::string& tensorboard_dir)
    : enabled_(enabled), path_(jsonl_path) {
  if (enabled_ && !tensorboard_dir.empty()) tensorboard_ = std::make_unique<TensorBoardWriter>(tensorboard_dir);
}

MetricsLog::~MetricsLog() {
  if (jsonl_) std::fclose(jsonl_);
}

namespace {
std::string format_value(const std::string& key, double v) {
  char buffer[64];
  if (std::nearbyint(v) == v && std::fabs(v) < 1e15 && key != "lr" && key.find("loss") == std::string::npos)
    std::snprintf(buffer, sizeof buffer, "%.0f", v);
  else if (key == "images_per_sec" || key.find("seconds") != std::string::npos)
    std::snprintf(buffer, sizeof buffer, "%.1f", v);
  else
    std::snprintf(buffer, sizeof buffer, "%.6g", v);
  return buffer;
}
}  // namespace

void MetricsLog::emit(const std::string& kind, const std::string& tag,
                      const std::vector<std::pair<std::string, double>>& values,
                      const std::vector<std::pair<std::string, std::string>>& words) {
  if (!enabled_) return;
  std::string line = "[" + tag + "]";
  nlohmann::json record = {{"event", kind}};
  for (const auto& [key, value] : values) {
    line += " " + key + "=" + format_value(key, value);
    record[key] = value;
  }
  for (const auto& [key, word] : words) {
    line += " " + key + "=" + word;
    record[key] = word;
  }
  {
    auto lock = terminal_lock();
    erase_status_line();  // the progress bar, if one is drawn: redrawn at its next update
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  if (jsonl_ == nullptr && !path_.empty()) {
    std::filesystem::path p(path_);
    std::error_code ec;
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
    jsonl_ = std::fopen(path_.c_str(), append_ ? "a" : "w");
    if (jsonl_ == nullptr) throw RuntimeError("cannot open output.metrics '" + path_ + "': " + std::strerror(errno));
  }
  if (jsonl_) {
    std::string text = record.dump() + "\n";
    std::fwrite(text.data(), 1, text.size(), jsonl_);
    std::fflush(jsonl_);
  }
  if (tensorboard_ && record.contains("step")) {
    std::vector<std::pair<std::string, float>> scalars;
    for (const auto& [key, value] : values)
      if (std::string tag = tensorboard_tag(kind, key); !tag.empty()) scalars.emplace_back(tag, static_cast<float>(value));
    tensorboard_->add_scalars(static_cast<int64_t>(record["step"].get<double>()), scalars);
  }
}

}  // namespace sdp
