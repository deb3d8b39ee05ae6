#include "train/output_check.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "config/sagemaker_env.hpp"
#include "core/error.hpp"
#include "distributed/agreement.hpp"

namespace sdp {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void refuse(const std::string& key, const std::string& path, const std::string& why) {
  throw InputError("key '" + key + "': cannot write to '" + path + "': " + why +
                   "; choose a writable location (e.g. --set " + key + "=...)");
}

void check_directory(const std::string& key, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) refuse(key, dir, ec.message());
  if (!fs::is_directory(dir, ec)) refuse(key, dir, "not a directory");
  // Permission bits do not tell (root, read-only mounts, quotas): write a probe file.
  const std::string probe =
      (fs::path(dir) / (".sdp-train-probe." + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) refuse(key, dir, std::strerror(errno));
  const char byte = 0;
  const bool written = ::write(fd, &byte, 1) == 1;
  const int saved_errno = errno;
  ::close(fd);
  ::unlink(probe.c_str());
  if (!written) refuse(key, dir, std::strerror(saved_errno));
}

void check_file(const std::string& key, const std::string& file) {
  const fs::path path(file);
  if (path.has_parent_path()) check_directory(key, path.parent_path().string());
  // Append: an existing file is not truncated here (the writer decides).
  std::FILE* f = std::fopen(file.c_str(), "a");
  if (f == nullptr) refuse(key, file, std::strerror(errno));
  std::fclose(f);
}

}  // namespace

void check_output_locations(const JobSpec& spec, const World& world) {
  run_on_all_ranks(world.comm(), [&] {
    if (world.rank() != 0) return;  // rank 0 alone writes every output
    check_directory("output.model_dir", spec.output.model_dir);
    check_directory("checkpoint.dir", spec.checkpoint.dir);
    if (!spec.output.metrics.empty()) check_file("output.metrics", spec.output.metrics);
    if (!spec.output.timeline.empty()) check_file("output.timeline", spec.output.timeline);
    if (const std::string tb = tensorboard_directory(spec.output); !tb.empty()) check_directory("output.tensorboard", tb);
  });
}

}  // namespace sdp
