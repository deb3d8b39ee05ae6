#include "obs/metrics.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/log.hpp"

namespace sdp {

MetricsLog::MetricsLog(bool enabled, const std::string& jsonl_path) : enabled_(enabled), path_(jsonl_path) {
  if (!enabled_ || jsonl_path.empty()) return;
  std::filesystem::path p(jsonl_path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  jsonl_ = std::fopen(jsonl_path.c_str(), "w");
  if (jsonl_ == nullptr)
    throw RuntimeError("cannot open output.metrics '" + jsonl_path + "': " + std::strerror(errno));
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
  if (jsonl_) {
    std::string text = record.dump() + "\n";
    std::fwrite(text.data(), 1, text.size(), jsonl_);
    std::fflush(jsonl_);
  }
}

}  // namespace sdp
