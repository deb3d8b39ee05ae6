#include "data/formats/data_files.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"

namespace sdp {

std::vector<std::string> list_data_files(const std::string& path, const std::string& who) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(who + ": " + path + " does not exist");
  if (!fs::is_directory(path, ec)) return {path};
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    const bool index = name.size() > 4 && name.compare(name.size() - 4, 4, ".idx") == 0;
    if (!entry.is_regular_file() || name.empty() || name[0] == '.' || index) continue;
    files.push_back(entry.path().string());
  }
  if (ec) throw InputError(who + ": cannot list " + path + ": " + ec.message());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw InputError(who + ": " + path + " holds no data file");
  return files;
}

std::optional<std::string> read_fresh_index(const std::string& data_path, const std::string& index_path,
                                            uint64_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(index_path, ec)) return std::nullopt;
  const auto index_time = fs::last_write_time(index_path, ec);
  if (ec) return std::nullopt;
  const auto data_time = fs::last_write_time(data_path, ec);
  if (ec || index_time <= data_time) return std::nullopt;
  const auto index_bytes = fs::file_size(index_path, ec);
  if (ec || index_bytes > max_bytes) return std::nullopt;
  std::FILE* f = std::fopen(index_path.c_str(), "rb");
  if (f == nullptr) return std::nullopt;
  std::string text(index_bytes, '\0');
  const size_t got = std::fread(text.data(), 1, text.size(), f);
  std::fclose(f);
  if (got != text.size()) return std::nullopt;
  return text;
}

void write_file_atomically(const std::string& path, const std::string& text) {
  // Hidden (a leading '.'), so that a rank listing the directory meanwhile skips it.
  const std::filesystem::path target(path);
  const std::string temp =
      (target.parent_path() / ("." + target.filename().string() + ".tmp." + std::to_string(::getpid()))).string();
  std::FILE* f = std::fopen(temp.c_str(), "wb");
  if (f == nullptr) throw RuntimeError("cannot create '" + temp + "': " + std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !written) {
    const int write_errno = errno;
    std::remove(temp.c_str());
    throw RuntimeError("cannot write '" + temp + "': " + std::strerror(write_errno));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    std::remove(temp.c_str());
    throw RuntimeError("cannot rename '" + temp + "' to '" + path + "': " + std::strerror(rename_errno));
  }
}

bool data_file_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

std::string find_first_file(const std::string& dir, const std::vector<std::string>& names,
                            const std::string& what) {
  std::string tried;
  for (const std::string& name : names) {
    std::string path = (std::filesystem::path(dir) / name).string();
    if (data_file_exists(path)) return path;
    tried += (tried.empty() ? "" : ", ") + path;
  }
  throw InputError(dir + ": missing " + what + " file: looked for " + tried);
}

}  // namespace sdp
