#include "data/sets/image_folder.hpp"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "core/error.hpp"

namespace sdp {
namespace fs = std::filesystem;

namespace {

enum class Kind { kImage, kUndecodable, kOther };

Kind kind_of(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return Kind::kOther;
  std::string ext = name.substr(dot);
  // ASCII lower case: the extensions are ASCII, and only ASCII letters can lower into them.
  for (char& ch : ext)
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  if (ext == ".jpg" || ext == ".jpeg" || ext == ".png") return Kind::kImage;
  if (ext == ".ppm" || ext == ".bmp" || ext == ".pgm" || ext == ".tif" || ext == ".tiff" ||
      ext == ".webp")
    return Kind::kUndecodable;
  return Kind::kOther;
}

// One directory of the walk: its path and the names of its non-directory entries.
struct WalkedDir {
  std::string path;
  std::vector<std::string> files;
};

void walk(const fs::path& dir, std::set<fs::path>& seen, std::vector<WalkedDir>& out) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(dir, ec);
  if (ec) throw InputError("image folder: cannot resolve " + dir.string() + ": " + ec.message());
  if (!seen.insert(canonical).second) return;  // a symlink loop or a second link to it
  WalkedDir here{dir.string(), {}};
  std::vector<fs::path> subdirs;
  fs::directory_iterator it(dir, ec), end;
  if (ec) throw InputError("image folder: cannot list " + dir.string() + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    std::error_code type_ec;
    // is_directory follows symlinks, as os.walk(followlinks=True) does.
    if (it->is_directory(type_ec))
      subdirs.push_back(it->path());
    else
      here.files.push_back(it->path().filename().string());
  }
  if (ec) throw InputError("image folder: cannot list " + dir.string() + ": " + ec.message());
  out.push_back(std::move(here));
  for (const fs::path& sub : subdirs) walk(sub, seen, out);
}

}  // namespace

ImageFolder list_image_folder(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw InputError("image folder " + root + ": " +
                     (fs::exists(root, ec) ? "not a directory" : "does not exist"));
  ImageFolder folder;
  fs::directory_iterator it(root, ec), end;
  if (ec) throw InputError("image folder " + root + ": cannot list: " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    std::error_code type_ec;
    if (it->is_directory(type_ec)) folder.classes.push_back(it->path().filename().string());
  }
  if (ec) throw InputError("image folder " + root + ": cannot list: " + ec.message());
  if (folder.classes.empty())
    throw InputError("image folder " + root + ": no class folders (expected root/<class>/<image>)");
  // std::string compares as unsigned char, i.e. UTF-8 byte order = code point order.
  std::sort(folder.classes.begin(), folder.classes.end());

  std::vector<std::string> empty_classes;
  for (size_t label = 0; label < folder.classes.size(); ++label) {
    std::vector<WalkedDir> dirs;
    std::set<fs::path> seen;
    walk(fs::path(root) / folder.classes[label], seen, dirs);
    // sorted(os.walk(...)): by directory path, then each directory's files by name.
    std::sort(dirs.begin(), dirs.end(),
              [](const WalkedDir& a, const WalkedDir& b) { return a.path < b.path; });
    size_t found = 0;
    for (WalkedDir& dir : dirs) {
      std::sort(dir.files.begin(), dir.files.end());
      for (const std::string& name : dir.files) {
        const std::string path = (fs::path(dir.path) / name).string();
        switch (kind_of(name)) {
          case Kind::kImage:
            folder.samples.push_back({path, static_cast<int32_t>(label)});
            ++found;
            break;
          case Kind::kUndecodable:
            throw InputError("image folder " + root + ": " + path +
                             ": only JPEG and PNG images can be decoded (torchvision's ImageFolder "
                             "would include this file; convert or remove it)");
          case Kind::kOther:
            break;
        }
      }
    }
    if (found == 0) empty_classes.push_back(folder.classes[label]);
  }
  if (!empty_classes.empty()) {
    std::string names;
    for (const std::string& c : empty_classes) names += (names.empty() ? "" : ", ") + c;
    throw InputError("image folder " + root + ": found no valid file for the classes " + names +
                     " (supported extensions: .jpg, .jpeg, .png)");
  }
  return folder;
}

}  // namespace sdp
