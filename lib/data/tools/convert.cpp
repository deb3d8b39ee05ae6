#include "data/tools/convert.hpp"

#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/formats/ctr_tfrecord.hpp"
#include "data/formats/libsvm.hpp"
#include "data/images/image_decode.hpp"
#include "data/images/image_encode.hpp"
#include "data/images/image_resize.hpp"
#include "data/formats/tar_shards.hpp"
#include "data/formats/tf_example.hpp"
#include "data/formats/tfrecord.hpp"

namespace sdp {

namespace {

std::string numbered(const char* format, int64_t value) {
  char text[64];
  std::snprintf(text, sizeof text, format, static_cast<long long>(value));
  return text;
}

// Sample i as a JPEG: planar CHW bytes to interleaved, optionally resized.
std::vector<uint8_t> sample_jpeg(const Dataset& d, int64_t i, const ConvertOptions& options) {
  const int c = d.channels, h = d.height, w = d.width;
  const uint8_t* planes = d.image(i);
  std::vector<uint8_t> pixels(static_cast<std::size_t>(c) * h * w);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int ch = 0; ch < c; ++ch)
        pixels[(static_cast<std::size_t>(y) * w + x) * c + ch] = planes[(static_cast<std::size_t>(ch) * h + y) * w + x];
  if (options.resize <= 0 || c != 3) return encode_jpeg(pixels.data(), w, h, c, options.quality, options.full_chroma);
  const int out_w = w <= h ? options.resize : static_cast<int>(int64_t{options.resize} * w / h);
  const int out_h = w <= h ? static_cast<int>(int64_t{options.resize} * h / w) : options.resize;
  std::vector<uint8_t> resized(static_cast<std::size_t>(out_w) * out_h * 3);
  resize_bilinear(pixels.data(), w, h, static_cast<std::size_t>(w) * 3, SampleWindow::of_box({0, 0, w, h}),
                  resized.data(), out_w, out_h);
  return encode_jpeg(resized.data(), out_w, out_h, 3, options.quality, options.full_chroma);
}

void check_options(const Dataset& d, const ConvertOptions& options) {
  const std::string& f = options.format;
  if (f != "tfrecord" && f != "image-folder" && f != "tar-shards")
    throw InputError("data convert: --format " + f + " is not one of tfrecord, image-folder, tar-shards");
  if (options.shards < 1) throw InputError("data convert: --shards must be >= 1");
  if (options.quality < 1 || options.quality > 100) throw InputError("data convert: --quality must be in 1-100");
  if (options.resize > 0 && d.channels != 3)
    throw InputError("data convert: --resize takes colour images; " + d.name + " has " + std::to_string(d.channels) +
                     " channel(s)");
  if (options.output.empty()) throw InputError("data convert: --output must name a directory");
}

// Class folders named by zero-padded label numbers: sorted, they are the labels again.
void write_image_folder(const Dataset& d, int64_t count, const ConvertOptions& options, ConvertResult& result) {
  const std::string dir = options.output + "/";
  const int digits = static_cast<int>(std::to_string(std::max(0, d.num_classes - 1)).size());
  for (int64_t i = 0; i < count; ++i) {
    const std::string folder = dir + numbered(("%0" + std::to_string(digits) + "lld").c_str(), d.labels[i]);
    if (!std::filesystem::exists(folder)) {
      std::filesystem::create_directories(folder);
      ++result.files;
    }
    const std::vector<uint8_t> jpeg = sample_jpeg(d, i, options);
    const std::string path = folder + "/" + options.prefix + numbered("_%06lld.jpg", i);
    std::FILE* out = std::fopen(path.c_str(), "wb");
    const bool written = out != nullptr && std::fwrite(jpeg.data(), 1, jpeg.size(), out) == jpeg.size();
    if (out == nullptr || std::fclose(out) != 0 || !written) throw RuntimeError("data convert: cannot write " + path);
    result.bytes += static_cast<int64_t>(jpeg.size());
  }
}

std::string shard_path(const ConvertOptions& options, int shard) {
  return options.output + "/" + options.prefix + numbered("-%05lld", shard) + numbered("-of-%05lld", options.shards);
}

// Sample i goes to shard i % shards, as Examples with TensorFlow's ImageNet keys; each shard
// gets its offset index, so training reads by offset at once.
void write_tfrecords(const Dataset& d, int64_t count, const ConvertOptions& options, ConvertResult& result) {
  const int shards = options.shards;
  std::vector<std::unique_ptr<TfRecordWriter>> writers;
  std::vector<std::string> paths;
  for (int s = 0; s < shards; ++s) {
    paths.push_back(shard_path(options, s));
    writers.push_back(std::make_unique<TfRecordWriter>(paths.back()));
  }
  for (int64_t i = 0; i < count; ++i) {
    const std::vector<uint8_t> jpeg = sample_jpeg(d, i, options);
    writers[static_cast<std::size_t>(i % shards)]->write(
        encode_example(jpeg, d.labels[i], "image/encoded", "image/class/label"));
    result.bytes += static_cast<int64_t>(jpeg.size());
  }
  for (auto& w : writers) w->close();
  for (const std::string& p : paths) write_tfrecord_index(p);
  result.files = shards;
}

// WebDataset shards: sample i as <key>.jpg and <key>.cls in shard i % shards.
void write_tar_shards(const Dataset& d, int64_t count, const ConvertOptions& options, ConvertResult& result) {
  const int shards = options.shards;
  std::vector<std::unique_ptr<TarWriter>> writers;
  for (int s = 0; s < shards; ++s)
    writers.push_back(std::make_unique<TarWriter>(options.output + "/" + options.prefix + numbered("-%05lld.tar", s)));
  for (int64_t i = 0; i < count; ++i) {
    const std::vector<uint8_t> jpeg = sample_jpeg(d, i, options);
    const std::string key = numbered("%08lld", i);
    TarWriter& tar = *writers[static_cast<std::size_t>(i % shards)];
    tar.add_file(key + ".jpg", jpeg);
    const std::string label = std::to_string(d.labels[i]);
    tar.add_file(key + ".cls", std::vector<uint8_t>(label.begin(), label.end()));
    result.bytes += static_cast<int64_t>(jpeg.size());
  }
  for (auto& w : writers) w->close();
  result.files = shards;
}

}  // namespace

ConvertResult convert_dataset(const Dataset& d, const ConvertOptions& options) {
  check_options(d, options);
  std::filesystem::create_directories(options.output);
  ConvertResult result;
  result.samples = options.limit > 0 ? std::min(options.limit, d.count) : d.count;
  if (options.format == "image-folder")
    write_image_folder(d, result.samples, options, result);
  else if (options.format == "tfrecord")
    write_tfrecords(d, result.samples, options, result);
  else
    write_tar_shards(d, result.samples, options, result);
  return result;
}

ConvertResult convert_libsvm(const std::string& input, const ConvertOptions& options) {
  if (options.format != "tfrecord")
    throw InputError("data convert: --from libsvm writes --format tfrecord (the SageMaker DeepFM sample's layout), not " +
                     options.format);
  if (options.shards < 1) throw InputError("data convert: --shards must be >= 1");
  if (options.fields < 0) throw InputError("data convert: --fields must be >= 0 (0: the longest row of the input)");
  if (options.output.empty()) throw InputError("data convert: --output must name a directory");
  if (input.empty()) throw InputError("data convert: --input must name the LibSVM file");

  CtrReadOptions layout;
  layout.fields = options.fields > 0 ? options.fields : longest_libsvm_row(input);
  if (layout.fields == 0)
    throw InputError("data convert: " + input + " has no id:value pair on any line: no feature to write");
  layout.table_rows = std::numeric_limits<int64_t>::max();  // the table is the training job's choice

  std::filesystem::create_directories(options.output);
  std::vector<std::unique_ptr<TfRecordWriter>> writers;
  for (int s = 0; s < options.shards; ++s) writers.push_back(std::make_unique<TfRecordWriter>(shard_path(options, s)));
  // One sample at a time: a file larger than memory converts all the same.
  LibsvmReader reader(input);
  CtrSample sample;
  CtrRecords row;
  CtrReadStats stats;
  std::vector<uint8_t> example;
  ConvertResult result;
  while ((options.limit <= 0 || result.samples < options.limit) && reader.next(sample)) {
    if (sample.ids.size() > static_cast<std::size_t>(layout.fields))
      throw InputError(reader.where() + ": the line has " + std::to_string(sample.ids.size()) +
                       " pairs, more than --fields " + std::to_string(layout.fields) + "; raise --fields to at least " +
                       std::to_string(sample.ids.size()) + ", or leave it out (the longest row of the input)");
    row.ids.clear();
    row.values.clear();
    row.labels.clear();
    try {
      append_ctr_sample(sample, layout, CtrSampleSource::kLibsvmLine, row, stats);
    } catch (const InputError& e) {
      throw InputError(reader.where() + ": " + e.what());
    }
    encode_ctr_example(row, 0, layout, example);
    writers[static_cast<std::size_t>(result.samples % options.shards)]->write(example);
    result.bytes += static_cast<int64_t>(example.size());
    ++result.samples;
  }
  for (auto& w : writers) w->close();
  result.files = options.shards;
  result.fields = layout.fields;
  result.padded = stats.padded;
  return result;
}

}  // namespace sdp
