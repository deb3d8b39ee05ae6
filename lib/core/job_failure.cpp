#include "core/job_failure.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace sdp {

namespace {

std::mutex failure_file_mutex;
std::string failure_file;  // guarded by failure_file_mutex

// `line` in `path` unless it exists; never a partial file under that name.
void write_first_failure(const std::string& path, const std::string& line) {
  static std::atomic<int> sequence{0};
  const std::string aside = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(sequence++);
  const int fd = ::open(aside.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  bool written = fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  if (fd >= 0) written = ::close(fd) == 0 && written;
  // link() fails with EEXIST when an earlier error is there: that one stays.
  const bool linked = written && (::link(aside.c_str(), path.c_str()) == 0 || errno == EEXIST);
  const int saved_errno = errno;
  if (fd >= 0) ::unlink(aside.c_str());
  if (!linked)
    std::fprintf(stderr, "sdp-train: warning: could not write the failure reason to %s: %s\n", path.c_str(),
                 std::strerror(saved_errno));
}

}  // namespace

void set_failure_file(const std::string& path) {
  std::lock_guard<std::mutex> lock(failure_file_mutex);
  failure_file = path;
}

void report_job_error(const std::string& message) {
  std::fprintf(stderr, "sdp-train: error: %s\n", message.c_str());
  std::fflush(stderr);
  std::string path;
  {
    std::lock_guard<std::mutex> lock(failure_file_mutex);
    path = failure_file;
  }
  if (path.empty()) return;
  std::string line = "sdp-train: error: " + message;
  std::replace(line.begin(), line.end(), '\n', ' ');  // one line, whatever the message held
  write_first_failure(path, line + "\n");
}

}  // namespace sdp
