#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"

namespace sdp {

namespace fs = std::filesystem;

void write_all(std::FILE* file, const void* data, std::size_t bytes, const std::string& path) {
  if (bytes != 0 && std::fwrite(data, 1, bytes, file) != bytes)
    throw RuntimeError("cannot write '" + path + "': " + std::strerror(errno));
}

void write_file_atomically(const std::string& path, const std::function<void(std::FILE*)>& write) {
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw RuntimeError("cannot create directory '" + dir.string() + "': " + ec.message());

  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* file = std::fopen(temp.c_str(), "wb");
  if (file == nullptr) throw RuntimeError("cannot create '" + temp + "': " + std::strerror(errno));
  try {
    write(file);
    if (std::fflush(file) != 0 || ::fsync(::fileno(file)) != 0)
      throw RuntimeError("cannot flush '" + temp + "': " + std::strerror(errno));
  } catch (...) {
    std::fclose(file);
    std::remove(temp.c_str());
    throw;
  }
  if (std::fclose(file) != 0) {
    std::remove(temp.c_str());
    throw RuntimeError("cannot close '" + temp + "': " + std::strerror(errno));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    throw RuntimeError("cannot rename '" + temp + "' to '" + path + "': " + std::strerror(errno));
  }
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

}  // namespace sdp
