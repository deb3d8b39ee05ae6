#include "obs/progress.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/log.hpp"

namespace sdp {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const int64_t s = std::llround(seconds);
  char buffer[32];
  if (s >= 3600)
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  else
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  return buffer;
}

std::string format_progress(const ProgressState& state, int width) {
  char buffer[128];
  std::snprintf(buffer, sizeof buffer, "epoch %lld/%lld ", static_cast<long long>(state.epoch),
                static_cast<long long>(state.epochs));
  const std::string head = buffer;
  std::snprintf(buffer, sizeof buffer, " %lld/%lld", static_cast<long long>(state.step),
                static_cast<long long>(state.total_steps));
  const std::string count = buffer;
  // The extras in the order they are given up when the line is too narrow (ETA last).
  std::string loss, speed;
  if (std::isfinite(state.loss)) {
    std::snprintf(buffer, sizeof buffer, " loss %.4f", state.loss);
    loss = buffer;
  }
  if (state.images_per_sec > 0) {
    std::snprintf(buffer, sizeof buffer, "  %.0f img/s", state.images_per_sec);
    speed = buffer;
  }
  const std::string eta = "  ETA " + format_duration(state.eta_seconds);
  constexpr int kMinBar = 10, kMaxBar = 30;
  auto room = [&](const std::string& extras) {
    return width - static_cast<int>(head.size() + count.size() + extras.size()) - 2;  // "[]"
  };
  std::string extras = loss + speed + eta;
  if (room(extras) < kMinBar) extras = loss + eta;
  if (room(extras) < kMinBar) extras = eta;
  if (room(extras) < kMinBar) extras.clear();
  const int bar = std::clamp(room(extras), 0, kMaxBar);
  const double fraction =
      state.total_steps > 0
          ? std::clamp(static_cast<double>(state.step) / static_cast<double>(state.total_steps),
                       0.0, 1.0)
          : 0.0;
  const int filled = static_cast<int>(fraction * bar);
  std::string line =
      head + "[" + std::string(filled, '#') + std::string(bar - filled, '-') + "]" + count + extras;
  if (width > 0 && static_cast<int>(line.size()) > width) line.resize(width);
  return line;
}

void EtaEstimator::add_step(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return;
  mean_ = mean_ < 0 ? seconds : mean_ + smoothing_ * (seconds - mean_);
}

double EtaEstimator::eta(int64_t steps_left) const {
  if (mean_ < 0) return -1;
  return mean_ * static_cast<double>(std::max<int64_t>(steps_left, 0));
}

bool stdout_is_terminal() {
  if (!::isatty(STDOUT_FILENO)) return false;
  const char* term = std::getenv("TERM");
  if (term != nullptr && std::strcmp(term, "dumb") == 0) return false;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) return true;  // not launched by mpirun
  // Open MPI's launcher hands each rank a pseudo-terminal and copies what it reads to its
  // own stdout: the bar belongs only where that is a terminal. A rank's parent is mpirun on
  // the launching node (orted elsewhere, whose stdout is no terminal).
  char link[PATH_MAX];
  const std::string fd = "/proc/" + std::to_string(::getppid()) + "/fd/1";
  const ssize_t n = ::readlink(fd.c_str(), link, sizeof link - 1);
  if (n <= 0) return false;
  link[n] = '\0';
  return std::strncmp(link, "/dev/pts/", 9) == 0 || std::strncmp(link, "/dev/tty", 8) == 0;
}

bool progress_bar_wanted(ProgressMode mode, bool is_rank0) {
  if (!is_rank0) return false;
  switch (mode) {
    case ProgressMode::kBar:
      return true;
    case ProgressMode::kLines:
      return false;
    case ProgressMode::kAuto:
      break;
  }
  return stdout_is_terminal();
}

ProgressBar::ProgressBar(bool enabled, std::FILE* out, double min_interval_s, int width)
    : enabled_(enabled),
      out_(out),
      min_interval_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(min_interval_s))),
      width_(width) {
  if (enabled_) set_status_line_eraser([this] { erase_locked(); });
}

ProgressBar::~ProgressBar() {
  if (!enabled_) return;
  finish();
  set_status_line_eraser(nullptr);
}

int ProgressBar::columns() const {
  if (width_ > 0) return width_;
  winsize size{};
  if (::ioctl(::fileno(out_), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col - 1;
  if (const char* c = std::getenv("COLUMNS"); c != nullptr && std::atoi(c) > 1)
    return std::atoi(c) - 1;
  return 79;  // mpirun's pseudo-terminal has no size: an 80-column terminal is the safe guess
}

void ProgressBar::update(const ProgressState& state) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  auto lock = terminal_lock();
  const bool last = state.step >= state.total_steps;
  if (visible_ && !last && now - last_draw_ < min_interval_) return;
  const std::string line = format_progress(state, columns());
  // \r back to column 0, the bar, then erase what a longer earlier bar left to its right.
  std::fprintf(out_, "\r%s\033[K", line.c_str());
  std::fflush(out_);
  visible_ = true;
  last_draw_ = now;
  ++draws_;
}

void ProgressBar::finish() {
  if (!enabled_) return;
  auto lock = terminal_lock();
  erase_locked();
}

void ProgressBar::erase_locked() {
  if (!visible_) return;
  std::fputs("\r\033[K", out_);
  std::fflush(out_);
  visible_ = false;
}

}  // namespace sdp
