// Writes the small binary seed corpora of the fuzz targets (valid tiny files, so the fuzzer
// starts past the magic numbers and headers): make_fuzz_seeds <corpus dir>. Makes
// <dir>/{safetensors,idx,cifar10,tfrecord,tar,image,libsvm}/; scripts/fuzz.sh adds the YAML and JSON seeds
// from configs/. Generated rather than committed so the tree holds no binary blobs.
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../unit/data/image_samples.hpp"  // the unit tests' JPEG / PNG encoders
#include "data/formats/ctr_tfrecord.hpp"
#include "data/formats/tar_shards.hpp"
#include "data/formats/tf_example.hpp"
#include "data/formats/tfrecord.hpp"
#include "io/checkpoint.hpp"
#include "io/safetensors.hpp"

namespace {

using Bytes = std::vector<uint8_t>;
namespace fs = std::filesystem;

void write(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

Bytes gzip(const Bytes& raw) {
  // gzip framing (windowBits 16 + 15), as `gzip` writes it.
  z_stream zs{};
  deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY);
  Bytes out(deflateBound(&zs, raw.size()) + 32);
  zs.next_in = const_cast<uint8_t*>(raw.data());
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

Bytes read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put_be32(Bytes& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<uint8_t>(x >> s));
}

// The idx target's framing: flags, little-endian image length, images, labels.
Bytes idx_input(bool gz, const Bytes& images, const Bytes& labels) {
  Bytes v{static_cast<uint8_t>(gz ? 1 : 0), static_cast<uint8_t>(images.size() & 0xff),
          static_cast<uint8_t>(images.size() >> 8)};
  v.insert(v.end(), images.begin(), images.end());
  v.insert(v.end(), labels.begin(), labels.end());
  return v;
}

void idx_seeds(const fs::path& dir) {
  for (uint32_t count : {1u, 3u}) {
    Bytes images, labels;
    put_be32(images, 0x803);
    put_be32(images, count);
    put_be32(images, 4);
    put_be32(images, 5);
    for (uint32_t i = 0; i < count * 20; ++i) images.push_back(static_cast<uint8_t>(i * 13));
    put_be32(labels, 0x801);
    put_be32(labels, count);
    for (uint32_t i = 0; i < count; ++i) labels.push_back(static_cast<uint8_t>(i % 10));
    const std::string n = std::to_string(count);
    write(dir / ("raw-" + n), idx_input(false, images, labels));
    write(dir / ("gz-" + n), idx_input(true, gzip(images), gzip(labels)));
  }
}

void cifar_seeds(const fs::path& dir) {
  for (int count : {1, 2}) {
    Bytes records;
    for (int r = 0; r < count; ++r) {
      records.push_back(static_cast<uint8_t>(r + 3));
      for (int k = 0; k < 3072; ++k) records.push_back(static_cast<uint8_t>((r * 3 + k) % 256));
    }
    Bytes raw{0}, gz{1};
    raw.insert(raw.end(), records.begin(), records.end());
    const Bytes z = gzip(records);
    gz.insert(gz.end(), z.begin(), z.end());
    write(dir / ("raw-" + std::to_string(count)), raw);
    write(dir / ("gz-" + std::to_string(count)), gz);
  }
}

void safetensors_seeds(const fs::path& dir) {
  using sdp::Tensor;
  Tensor w({2, 3}, sdp::DType::kF32);
  for (int i = 0; i < 6; ++i) w.data<float>()[i] = 0.5f * static_cast<float>(i);
  Tensor b({3}, sdp::DType::kF16);
  Tensor m({2, 1, 2}, sdp::DType::kBF16);
  Tensor s(sdp::Shape{}, sdp::DType::kF32);  // a scalar: rank 0, one element
  const std::map<std::string, std::string> meta{
      {"format", sdp::kCheckpointFormat}, {"step", "7"}, {"epoch", "1"}};
  sdp::save_safetensors(
      (dir / "checkpoint").string(),
      {{"fc.weight", w}, {"fc.bias", b}, {"optimizer.fc.weight.momentum", m}, {"step_scalar", s}},
      meta);
  sdp::save_safetensors((dir / "model").string(), {{"fc.weight", w}}, {});
  sdp::save_safetensors((dir / "empty").string(), {}, meta);
}

// The tfrecord target's framing: a flags byte (bit 0: the rest is one Example), then the
// bytes. TFRecord files of Examples as the ImageNet converters write them, plain and gzip,
// one of records that are not Examples, and Examples alone.
void tfrecord_seeds(const fs::path& dir) {
  const fs::path tmp = dir / "records.tmp";
  auto framed = [&](uint8_t flags, const Bytes& bytes) {
    Bytes input{flags};
    input.insert(input.end(), bytes.begin(), bytes.end());
    return input;
  };
  for (bool gz : {false, true}) {
    sdp::TfRecordWriter writer(tmp.string(), gz);
    for (int i = 0; i < 3; ++i) {
      Bytes image(20 + 7 * i);
      for (std::size_t k = 0; k < image.size(); ++k) image[k] = static_cast<uint8_t>(k * 29 + i);
      const Bytes example = sdp::encode_example(image, i - 1, "image/encoded", "image/class/label");
      writer.write(example);
      if (!gz) write(dir / ("example-" + std::to_string(i)), framed(1, example));
    }
    writer.close();
    write(dir / (gz ? "examples-gz" : "examples"), framed(0, read(tmp)));
  }
  // CTR samples in the SageMaker DeepFM layout (label, ids, values), as Examples and as a file.
  sdp::CtrRecords ctr;
  ctr.fields = 3;
  ctr.ids = {1, 7, 0, 99, 3, 250};
  ctr.values = {1, 0.5f, 0, 1, -2, 1};
  ctr.labels = {1, 0};
  Bytes ctr_example;
  for (int64_t row = 0; row < ctr.size(); ++row) {
    sdp::encode_ctr_example(ctr, row, sdp::CtrReadOptions{}, ctr_example);
    write(dir / ("ctr-example-" + std::to_string(row)), framed(1, ctr_example));
  }
  sdp::write_ctr_tfrecord(ctr, tmp.string());
  write(dir / "ctr-examples", framed(0, read(tmp)));
  sdp::TfRecordWriter other(tmp.string());
  other.write(Bytes{'a', 'b', 'c'});
  other.write(Bytes{});
  other.close();
  write(dir / "not-examples", framed(0, read(tmp)));
  fs::remove(tmp);
}

// The libsvm target's framing: a flags byte (bit 0: skip bad lines, bit 1: hash large ids,
// bits 2-4: fields - 1), a byte of table rows - 1, then the file. a9a-like lines, every label
// form, CRLF, comments, and lines with each kind of defect; plain and gzip.
void libsvm_seeds(const fs::path& dir) {
  const std::string good =
      "-1 3:1 11:1 14:1 19:1 39:1 42:1 55:1 64:1\n"
      "+1 5:1 7:0.25 14:1\r\n"
      "0 1:2.5e-3 2:-4\n"
      "\n"
      "1.0 100:1 # a comment\n"
      "1\n";
  const std::string bad =
      "1 3:1 4\n"
      "1 x:1\n"
      "1 -2:1\n"
      "1 2:nan\n"
      "1 2:1e50\n"
      "2 1:1\n"
      "1 1:1 2:1 3:1 4:1 5:1 6:1 7:1 8:1 9:1\n"
      "0 1:1";
  auto input = [](uint8_t flags, uint8_t rows_minus_1, const Bytes& file) {
    Bytes v{flags, rows_minus_1};
    v.insert(v.end(), file.begin(), file.end());
    return v;
  };
  const Bytes good_bytes(good.begin(), good.end());
  Bytes mixed = good_bytes;
  mixed.insert(mixed.end(), bad.begin(), bad.end());
  const uint8_t eight_fields = 7 << 2;
  write(dir / "good", input(eight_fields, 127, good_bytes));
  write(dir / "good-hash", input(eight_fields | 2, 9, good_bytes));
  write(dir / "mixed-skip", input(eight_fields | 1, 255, mixed));
  write(dir / "mixed-skip-hash", input(eight_fields | 3, 9, mixed));
  write(dir / "mixed-abort", input(eight_fields, 255, mixed));
  write(dir / "good-gz", input(eight_fields | 1, 127, gzip(good_bytes)));
}

// The tar target's framing: a flags byte (bit 0: gzip), then the shard. Shards with two
// samples, a directory, a GNU long name and a pax header.
void tar_seeds(const fs::path& dir) {
  for (bool gz : {false, true}) {
    const fs::path tmp = dir / "shard.tmp";
    {
      sdp::TarWriter tar(tmp.string(), gz);
      tar.add_directory("train");
      tar.add_file("train/s1.jpg", Bytes(700, 0x5a));
      tar.add_file("train/s1.cls", Bytes{'3'});
      tar.add_file("train/" + std::string(110, 'n') + ".jpg", Bytes(30, 0x11));
      const std::string pax = "20 path=long/s3.jpg\n";  // 20 bytes, the length included
      tar.add_entry("PaxHeaders/s3", 'x', Bytes(pax.begin(), pax.end()));
      tar.add_file("s3.jpg", Bytes(5, 0x22));
      tar.close();
    }
    Bytes input{static_cast<uint8_t>(gz ? 1 : 0)};
    const Bytes shard = read(tmp);
    input.insert(input.end(), shard.begin(), shard.end());
    write(dir / (gz ? "shard-gz" : "shard"), input);
    fs::remove(tmp);
  }
}

// The image target's framing: output size, crop fractions, then the file. Small JPEGs
// (baseline, progressive, gray, CMYK, 4:4:4) and PNGs (RGB, palette, 16-bit gray+alpha,
// interlaced), so the fuzzer starts inside the entropy-coded and zlib data.
void image_seeds(const fs::path& dir) {
  using sdp::testing::encode_jpeg;
  using sdp::testing::encode_png;
  using sdp::testing::gradient_rgb;
  using sdp::testing::make_pixels;
  const Bytes framing{40, 30, 10, 20, 200, 180};
  auto put = [&](const std::string& name, const Bytes& file) {
    Bytes input = framing;
    input.insert(input.end(), file.begin(), file.end());
    write(dir / name, input);
  };
  const Bytes rgb = gradient_rgb(40, 24);
  put("baseline.jpg", encode_jpeg(rgb, 40, 24));
  put("progressive.jpg", encode_jpeg(rgb, 40, 24, TJPF_RGB, TJSAMP_420, 80, TJFLAG_PROGRESSIVE));
  put("444.jpg", encode_jpeg(rgb, 40, 24, TJPF_RGB, TJSAMP_444, 90));
  put("gray.jpg", encode_jpeg(make_pixels(17, 9, 1, [](int x, int y, int) { return x * 9 + y; }),
                              17, 9, TJPF_GRAY));
  put("cmyk.jpg",
      encode_jpeg(make_pixels(16, 8, 4, [](int x, int, int c) { return x * 16 + c * 40; }), 16, 8,
                  TJPF_CMYK));
  put("rgb.png", sdp::testing::encode_png_rgb(rgb, 40, 24));
  sdp::testing::PngSpec palette;
  palette.colour_type = PNG_COLOR_TYPE_PALETTE;
  palette.palette = {{0, 0, 0}, {255, 0, 0}, {0, 255, 0}};
  put("palette.png", encode_png(make_pixels(9, 5, 1, [](int x, int y, int) { return (x + y) % 3; }),
                                9, 5, palette));
  sdp::testing::PngSpec gray_alpha16;
  gray_alpha16.colour_type = PNG_COLOR_TYPE_GRAY_ALPHA;
  gray_alpha16.bit_depth = 16;
  put("gray-alpha-16.png",
      encode_png(make_pixels(6, 4, 4, [](int x, int y, int b) { return x * 40 + y + b; }), 6, 4,
                 gray_alpha16));
  sdp::testing::PngSpec interlaced;
  interlaced.interlaced = true;
  put("interlaced.png", encode_png(rgb, 40, 24, interlaced));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_fuzz_seeds <corpus dir>\n");
    return 2;
  }
  const fs::path root = argv[1];
  for (const char* sub : {"safetensors", "idx", "cifar10", "tfrecord", "tar", "image", "libsvm"})
    fs::create_directories(root / sub);
  safetensors_seeds(root / "safetensors");
  idx_seeds(root / "idx");
  cifar_seeds(root / "cifar10");
  tfrecord_seeds(root / "tfrecord");
  tar_seeds(root / "tar");
  image_seeds(root / "image");
  libsvm_seeds(root / "libsvm");
  return 0;
}
