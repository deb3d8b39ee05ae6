#include "data/data_files.hpp"

#include <algorithm>
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

}  // namespace sdp
