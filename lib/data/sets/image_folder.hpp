// The image-folder data set layout of torchvision's ImageFolder (docs/data-formats.md):
// root/<class>/**/<image>. Listing only; the images are decoded by data/image_decode.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sdp {

struct ImageFolderSample {
  std::string path;   // root/<class>/.../<file>, joined as os.path.join does
  int32_t label = 0;  // index into ImageFolder::classes
};

struct ImageFolder {
  std::vector<std::string> classes;  // class folder names, sorted
  std::vector<ImageFolderSample> samples;
};

// Lists `root` in torchvision's ImageFolder order, so label i and sample j mean the same
// here as in a PyTorch run over the same tree:
//  * classes: the names of root's subdirectories (symlinks followed), sorted by code point
//    (Python's sorted() on str; for UTF-8 names that is byte order, std::string's order);
//  * samples: per class in that order, every file under the class folder, recursively with
//    symlinks followed (os.walk(followlinks=True)), directories in sorted path order and the
//    files of each sorted by name, whose extension is .jpg, .jpeg or .png in any case.
// torchvision also accepts .ppm .bmp .pgm .tif .tiff .webp; we decode only JPEG and PNG, and
// skipping those files would silently give a different data set (other counts, other
// sample indices), so a file with one of these extensions is an InputError naming it.
// Files with any other extension are ignored, as torchvision ignores them. A directory
// reached twice through symlinks is listed once (os.walk would loop).
// InputError (naming the folder): root missing or not a directory, no class folder, a class
// folder without any image ("Found no valid file for the classes ...").
ImageFolder list_image_folder(const std::string& root);

}  // namespace sdp
