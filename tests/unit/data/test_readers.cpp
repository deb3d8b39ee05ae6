#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <numeric>

#include "core/error.hpp"
#include "data/sets/cifar10.hpp"
#include "data/formats/compressed_file.hpp"
#include "data/sets/mnist.hpp"
#include "temp_dir.hpp"

namespace sdp {
namespace {

using testing::TempDir;

// Runs `fn`, expects an InputError whose message contains every one of `parts`.
template <typename Fn>
void expect_input_error(Fn fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    std::string what = e.what();
    for (const std::string& part : parts)
      EXPECT_NE(what.find(part), std::string::npos) << "'" << part << "' not in: " << what;
    EXPECT_EQ(e.code(), ExitCode::kUsage);
  }
}

void write_mnist(const TempDir& dir, const std::string& prefix, uint32_t n, bool gz) {
  auto write = gz ? testing::write_gz : testing::write_raw;
  std::string suffix = gz ? ".gz" : "";
  write(dir.file(prefix + "-images-idx3-ubyte" + suffix), testing::idx_images(n, 4, 3));
  write(dir.file(prefix + "-labels-idx1-ubyte" + suffix), testing::idx_labels(n));
}

void check_mnist_decode(const Dataset& ds, int64_t n) {
  ASSERT_EQ(ds.count, n);
  EXPECT_EQ(ds.channels, 1);
  EXPECT_EQ(ds.height, 4);
  EXPECT_EQ(ds.width, 3);
  EXPECT_EQ(ds.num_classes, 10);
  ASSERT_EQ(ds.images.size(), static_cast<std::size_t>(n * 12));
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(ds.labels[i], i % 10);
    for (int k = 0; k < 12; ++k) ASSERT_EQ(ds.image(i)[k], (i * 7 + k) % 256);
  }
  EXPECT_FLOAT_EQ(ds.normalization.mean[0], 0.1307f);
  EXPECT_FLOAT_EQ(ds.normalization.std[0], 0.3081f);
}

TEST(Mnist, DecodesRawAndGzip) {
  for (bool gz : {false, true}) {
    TempDir dir;
    write_mnist(dir, "train", 13, gz);
    write_mnist(dir, "t10k", 5, gz);
    check_mnist_decode(load_mnist(dir.str(), Split::kTrain), 13);
    check_mnist_decode(load_mnist(dir.str(), Split::kTest), 5);
  }
}

TEST(Mnist, WrongMagic) {
  TempDir dir;
  testing::write_raw(dir.file("img"), testing::idx_images(3, 2, 2, /*magic=*/0x801));
  testing::write_raw(dir.file("lbl"), testing::idx_labels(3));
  expect_input_error([&] { load_mnist_files(dir.file("img"), dir.file("lbl")); },
                     {dir.file("img"), "wrong magic", "0x00000801"});
  testing::write_raw(dir.file("img"), testing::idx_images(3, 2, 2));
  testing::write_raw(dir.file("lbl"), testing::idx_labels(3, /*magic=*/0x803));
  expect_input_error([&] { load_mnist_files(dir.file("img"), dir.file("lbl")); },
                     {dir.file("lbl"), "wrong magic"});
}

TEST(Mnist, Truncated) {
  TempDir dir;
  auto img = testing::idx_images(3, 2, 2);
  img.resize(img.size() - 1);
  testing::write_raw(dir.file("img"), img);
  testing::write_raw(dir.file("lbl"), testing::idx_labels(3));
  expect_input_error([&] { load_mnist_files(dir.file("img"), dir.file("lbl")); },
                     {dir.file("img"), "truncated"});
  // Truncated inside the header, and a truncated label file.
  testing::write_raw(dir.file("img"), {0, 0, 8});
  expect_input_error([&] { load_mnist_files(dir.file("img"), dir.file("lbl")); },
                     {dir.file("img"), "truncated"});
  auto lbl = testing::idx_labels(3);
  lbl.pop_back();
  testing::write_raw(dir.file("img"), testing::idx_images(3, 2, 2));
  testing::write_raw(dir.file("lbl"), lbl);
  expect_input_error([&] { load_mnist_files(dir.file("img"), dir.file("lbl")); },
                     {dir.file("lbl"), "truncated"});
}

// Fuzzing finding (docs/robustness.md): a header claiming 2^28 images of 4096x4096 made the
// reader allocate the whole 4 PiB before reading a pixel (std::bad_alloc, not exit 2). Such a
// header is now implausible, and a plausible one (4 GiB) is read as the pixels arrive, so a
// short file is a truncation error after its few bytes, not a 4 GiB allocation.
TEST(Mnist, HugeHeaderCountsAllocateNothing) {
  TempDir dir;
  auto header = [](uint32_t count, uint32_t rows, uint32_t cols) {
    std::vector<uint8_t> img;
    testing::put_be32(img, 0x803);
    testing::put_be32(img, count);
    testing::put_be32(img, rows);
    testing::put_be32(img, cols);
    img.insert(img.end(), 100, 7);
    return img;
  };
  std::vector<uint8_t> lbl;
  testing::put_be32(lbl, 0x801);
  testing::put_be32(lbl, 0xffffffffu);
  for (bool gz : {false, true}) {
    const std::string suffix = gz ? ".gz" : "";
    const std::string img = dir.file("img" + suffix), lbls = dir.file("lbl" + suffix);
    auto write = gz ? testing::write_gz : testing::write_raw;
    write(lbls, lbl);
    write(img, header(1u << 28, 4096, 4096));
    expect_input_error([&] { load_mnist_files(img, lbls); }, {img, "implausible IDX dimensions"});
    write(img, header(1u << 20, 64, 64));  // exactly the 4 GiB cap
    expect_input_error([&] { load_mnist_files(img, lbls); }, {img, "truncated", "found 100"});
    // The label file's count is checked against the images before anything is allocated.
    testing::write_raw(dir.file("ok"), testing::idx_images(2, 2, 2));
    expect_input_error([&] { load_mnist_files(dir.file("ok"), lbls); }, {lbls, "does not match"});
  }
}

// A gzip stream expands ~1000x: read_all stops at its limit instead of taking the memory.
TEST(CompressedFile, ReadAllStopsAtItsLimit) {
  TempDir dir;
  testing::write_gz(dir.file("z.gz"), std::vector<uint8_t>(5000, 0));
  EXPECT_EQ(CompressedFile(dir.file("z.gz")).read_all(5000).size(), 5000u);
  expect_input_error([&] { CompressedFile(dir.file("z.gz")).read_all(4999); },
                     {dir.file("z.gz"), "more than 4999 bytes"});
}

TEST(Mnist, TrailingBytes) {
  TempDir dir;
  auto img = testing::idx_images(3, 2, 2);
  img.push_back(0);
  testing::write_raw(dir.file("img"), img);
  testing::write_raw(dir.file("lbl"), testing::idx_labels(3));
  expect_input_error([&] { load_mnist_files(dir.file("img"), dir.file("lbl")); },
                     {dir.file("img"), "after the data"});
}

TEST(Mnist, CountMismatch) {
  TempDir dir;
  testing::write_raw(dir.file("img"), testing::idx_images(3, 2, 2));
  testing::write_raw(dir.file("lbl"), testing::idx_labels(4));
  expect_input_error([&] { load_mnist_files(dir.file("img"), dir.file("lbl")); },
                     {dir.file("lbl"), "label count 4", "image count 3"});
}

TEST(Mnist, BadLabel) {
  TempDir dir;
  auto lbl = testing::idx_labels(3);
  lbl.back() = 10;
  testing::write_raw(dir.file("img"), testing::idx_images(3, 2, 2));
  testing::write_raw(dir.file("lbl"), lbl);
  expect_input_error([&] { load_mnist_files(dir.file("img"), dir.file("lbl")); },
                     {dir.file("lbl"), "label 10"});
}

TEST(Mnist, BadGzip) {
  TempDir dir;
  testing::write_gz(dir.file("img.gz"), testing::idx_images(50, 8, 8));
  testing::write_raw(dir.file("lbl"), testing::idx_labels(50));
  // Not gzip at all, though named .gz.
  testing::write_raw(dir.file("bad.gz"), testing::idx_images(50, 8, 8));
  expect_input_error([&] { load_mnist_files(dir.file("bad.gz"), dir.file("lbl")); },
                     {dir.file("bad.gz"), "gzip"});
  // Corrupt deflate data after a valid header.
  auto gz = testing::read_raw(dir.file("img.gz"));
  auto corrupt = gz;
  for (std::size_t i = 20; i < corrupt.size() - 8; i += 3) corrupt[i] ^= 0x5a;
  testing::write_raw(dir.file("corrupt.gz"), corrupt);
  expect_input_error([&] { load_mnist_files(dir.file("corrupt.gz"), dir.file("lbl")); },
                     {dir.file("corrupt.gz")});
  // A gzip stream cut in the middle.
  auto cut = gz;
  cut.resize(gz.size() / 2);
  testing::write_raw(dir.file("cut.gz"), cut);
  expect_input_error([&] { load_mnist_files(dir.file("cut.gz"), dir.file("lbl")); },
                     {dir.file("cut.gz")});
}

TEST(Mnist, MissingFilesListWhatWasLookedFor) {
  TempDir dir;
  expect_input_error([&] { load_mnist(dir.str(), Split::kTrain); },
                     {dir.file("train-images-idx3-ubyte"), dir.file("train-images-idx3-ubyte.gz")});
  testing::write_raw(dir.file("t10k-images-idx3-ubyte"), testing::idx_images(2, 2, 2));
  expect_input_error([&] { load_mnist(dir.str(), Split::kTest); },
                     {dir.file("t10k-labels-idx1-ubyte.gz")});
  expect_input_error([&] { load_mnist_files(dir.file("nope"), dir.file("nope2")); },
                     {dir.file("nope"), "no such file"});
}

TEST(Cifar10, DecodesRawAndGzipAndConcatenates) {
  TempDir dir;
  testing::write_raw(dir.file("a.bin"), testing::cifar_records(3, 0));
  testing::write_gz(dir.file("b.bin.gz"), testing::cifar_records(2, 7));
  Dataset ds = load_cifar10_files({dir.file("a.bin"), dir.file("b.bin.gz")});
  ASSERT_EQ(ds.count, 5);
  EXPECT_EQ(ds.channels, 3);
  EXPECT_EQ(ds.height, 32);
  EXPECT_EQ(ds.width, 32);
  EXPECT_EQ(ds.labels, (std::vector<int32_t>{0, 1, 2, 7, 8}));
  for (int i = 0; i < 5; ++i) {
    int r = i < 3 ? i : i - 3;
    for (int k : {0, 1, 1023, 1024, 2048, 3071}) ASSERT_EQ(ds.image(i)[k], (r * 3 + k) % 256);
  }
}

TEST(Cifar10, DirectoryConventions) {
  TempDir dir;
  for (int i = 1; i <= 5; ++i)
    testing::write_gz(dir.file("data_batch_" + std::to_string(i) + ".bin.gz"),
                      testing::cifar_records(2, i));
  // No test_batch: train = batches 1-4, test = batch 5.
  EXPECT_EQ(load_cifar10(dir.str(), Split::kTrain).count, 8);
  Dataset test = load_cifar10(dir.str(), Split::kTest);
  EXPECT_EQ(test.count, 2);
  EXPECT_EQ(test.labels[0], 5);
  // With the official test batch: train = batches 1-5, test = test_batch.
  testing::write_raw(dir.file("test_batch.bin"), testing::cifar_records(3, 9));
  EXPECT_EQ(load_cifar10(dir.str(), Split::kTrain).count, 10);
  test = load_cifar10(dir.str(), Split::kTest);
  EXPECT_EQ(test.count, 3);
  EXPECT_EQ(test.labels[0], 9);
}

TEST(Cifar10, BadSizeBadLabelBadGzipMissing) {
  TempDir dir;
  auto recs = testing::cifar_records(2);
  recs.pop_back();
  testing::write_raw(dir.file("short.bin"), recs);
  expect_input_error([&] { load_cifar10_files({dir.file("short.bin")}); },
                     {dir.file("short.bin"), "6145", "multiple of the 3073"});
  testing::write_raw(dir.file("empty.bin"), {});
  expect_input_error([&] { load_cifar10_files({dir.file("empty.bin")}); },
                     {dir.file("empty.bin"), "multiple"});
  recs = testing::cifar_records(2);
  recs[3073] = 10;
  testing::write_gz(dir.file("label.bin.gz"), recs);
  expect_input_error([&] { load_cifar10_files({dir.file("label.bin.gz")}); },
                     {dir.file("label.bin.gz"), "label byte 10", "record 1"});
  testing::write_raw(dir.file("fake.bin.gz"), testing::cifar_records(1));
  expect_input_error([&] { load_cifar10_files({dir.file("fake.bin.gz")}); },
                     {dir.file("fake.bin.gz"), "gzip"});
  expect_input_error([&] { load_cifar10(dir.str(), Split::kTrain); },
                     {dir.file("data_batch_1.bin"), dir.file("data_batch_1.bin.gz")});
}

// --- the real data sets in ../shared/data --------------------------------------------

std::string real_dir(const std::string& sub) {
  return (std::filesystem::path(testing::data_dir()) / sub).string();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(RealData, Mnist) {
  std::string dir = real_dir("mnist");
  if (!std::filesystem::exists(std::filesystem::path(dir) / "train-images-idx3-ubyte.gz") &&
      !std::filesystem::exists(std::filesystem::path(dir) / "train-images-idx3-ubyte"))
    GTEST_SKIP() << "MNIST not found in " << dir << " (set SDP_DATA_DIR to the shared data)";
  auto t0 = std::chrono::steady_clock::now();
  Dataset train = load_mnist(dir, Split::kTrain);
  Dataset test = load_mnist(dir, Split::kTest);
  std::cout << "[          ] MNIST train+test load: " << seconds_since(t0) << " s\n";
  EXPECT_EQ(train.count, 60000);
  EXPECT_EQ(test.count, 10000);
  EXPECT_EQ(train.height, 28);
  auto hist = train.label_histogram();
  EXPECT_EQ(std::accumulate(hist.begin(), hist.end(), int64_t{0}), 60000);
  EXPECT_EQ(hist[1], 6742);  // the published per-class counts of the training set
  EXPECT_EQ(hist[5], 5421);
  auto test_hist = test.label_histogram();
  EXPECT_EQ(std::accumulate(test_hist.begin(), test_hist.end(), int64_t{0}), 10000);
  // The measured statistics are the published normalization constants.
  Normalization norm = train.measure_normalization();
  EXPECT_NEAR(norm.mean[0], 0.1307, 1e-4);
  EXPECT_NEAR(norm.std[0], 0.3081, 1e-4);
}

TEST(RealData, Cifar10) {
  std::string dir = real_dir("cifar10");
  if (!std::filesystem::exists(std::filesystem::path(dir) / "data_batch_1.bin.gz") &&
      !std::filesystem::exists(std::filesystem::path(dir) / "data_batch_1.bin"))
    GTEST_SKIP() << "CIFAR-10 not found in " << dir << " (set SDP_DATA_DIR to the shared data)";
  auto t0 = std::chrono::steady_clock::now();
  Dataset train = load_cifar10(dir, Split::kTrain);
  Dataset test = load_cifar10(dir, Split::kTest);
  std::cout << "[          ] CIFAR-10 train+test load: " << seconds_since(t0) << " s\n";
  EXPECT_EQ(train.count, 40000);
  EXPECT_EQ(test.count, 10000);
  for (const Dataset* ds : {&train, &test}) {
    auto hist = ds->label_histogram();
    EXPECT_EQ(std::accumulate(hist.begin(), hist.end(), int64_t{0}), ds->count);
    for (int64_t h : hist) EXPECT_GT(h, ds->count / 20);  // every class well represented
  }
  Normalization norm = train.measure_normalization();
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(norm.mean[c], Normalization::cifar10().mean[c], 5e-3);
    EXPECT_NEAR(norm.std[c], Normalization::cifar10().std[c], 5e-3);
  }
}

}  // namespace
}  // namespace sdp
