#include <gtest/gtest.h>

#include <filesystem>

#include "data/sets/image_folder.hpp"
#include "expect_input_error.hpp"
#include "temp_dir.hpp"

namespace sdp {
namespace {

namespace fs = std::filesystem;
using testing::expect_input_error;
using testing::TempDir;

void touch(const std::string& path) {
  fs::create_directories(fs::path(path).parent_path());
  testing::write_raw(path, {1});
}

TEST(ImageFolder, ClassesAndFilesInTorchvisionOrder) {
  TempDir dir;
  const std::string root = dir.file("root");
  // Code point order: "B" (0x42) < "a" (0x61) < "b10" < "b2" < "ä" (U+00E4, bytes C3 A4).
  for (const char* cls : {"b2", "\xc3\xa4", "B", "b10", "a"}) touch(root + "/" + cls + "/x.jpg");
  touch(root + "/a/Z.PNG");
  touch(root + "/a/b.JPEG");
  touch(root + "/a/notes.txt");      // ignored, as torchvision ignores it
  touch(root + "/a/sub/c.jpg");      // recursive
  touch(root + "/a/sub dir/d.png");  // listed after a/sub: "a/sub" is a prefix of "a/sub dir"
  touch(root + "/stray.jpg");        // a file in root is not a class
  const ImageFolder folder = list_image_folder(root);
  EXPECT_EQ(folder.classes, (std::vector<std::string>{"B", "a", "b10", "b2", "\xc3\xa4"}));
  std::vector<std::string> paths;
  std::vector<int32_t> labels;
  for (const ImageFolderSample& s : folder.samples) {
    paths.push_back(s.path.substr(root.size() + 1));
    labels.push_back(s.label);
  }
  // sorted(os.walk()): "a" < "a/sub" < "a/sub dir" by path string ("a/sub" is a prefix).
  EXPECT_EQ(paths, (std::vector<std::string>{"B/x.jpg", "a/Z.PNG", "a/b.JPEG", "a/x.jpg",
                                             "a/sub/c.jpg", "a/sub dir/d.png", "b10/x.jpg",
                                             "b2/x.jpg", "\xc3\xa4/x.jpg"}));
  EXPECT_EQ(labels, (std::vector<int32_t>{0, 1, 1, 1, 1, 1, 2, 3, 4}));
}

TEST(ImageFolder, FollowsSymlinksOnceEach) {
  TempDir dir;
  const std::string root = dir.file("root");
  touch(dir.file("elsewhere/cat1.jpg"));
  fs::create_directories(root);
  fs::create_directory_symlink(dir.file("elsewhere"), root + "/cat");  // class via symlink
  touch(root + "/dog/d.jpg");
  fs::create_directory_symlink(root + "/dog", root + "/dog/loop");  // would loop forever
  const ImageFolder folder = list_image_folder(root);
  EXPECT_EQ(folder.classes, (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(folder.samples.size(), 2u);
  EXPECT_EQ(folder.samples[0].path, root + "/cat/cat1.jpg");
  EXPECT_EQ(folder.samples[1].path, root + "/dog/d.jpg");
}

TEST(ImageFolder, RejectsMissingRootNoClassesAndEmptyClasses) {
  TempDir dir;
  expect_input_error([&] { list_image_folder(dir.file("missing")); },
                     {dir.file("missing"), "does not exist"});
  touch(dir.file("file"));
  expect_input_error([&] { list_image_folder(dir.file("file")); },
                     {dir.file("file"), "not a directory"});
  fs::create_directories(dir.file("flat"));
  touch(dir.file("flat/a.jpg"));
  expect_input_error([&] { list_image_folder(dir.file("flat")); },
                     {dir.file("flat"), "no class folders"});
  touch(dir.file("r/full/a.jpg"));
  touch(dir.file("r/empty1/readme.txt"));
  fs::create_directories(dir.file("r/empty2"));
  expect_input_error([&] { list_image_folder(dir.file("r")); },
                     {dir.file("r"), "found no valid file for the classes empty1, empty2"});
}

TEST(ImageFolder, RejectsImagesItCannotDecodeRatherThanSkippingThem) {
  TempDir dir;
  touch(dir.file("r/c/a.jpg"));
  touch(dir.file("r/c/b.WebP"));
  expect_input_error([&] { list_image_folder(dir.file("r")); },
                     {dir.file("r/c/b.WebP"), "only JPEG and PNG"});
}

}  // namespace
}  // namespace sdp
