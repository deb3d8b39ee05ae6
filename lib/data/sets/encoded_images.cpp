#include "data/sets/encoded_images.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.hpp"
#include "core/log.hpp"
#include "data/formats/data_files.hpp"
#include "data/images/image_decode.hpp"
#include "data/sets/image_folder.hpp"
#include "data/formats/tf_example.hpp"
#include "data/formats/tfrecord.hpp"
#include "data/loading/worker_pool.hpp"

namespace sdp {

namespace {

class TfRecordSource final : public EncodedSource {
 public:
  TfRecordSource(const std::string& path, const TfRecordSourceOptions& options) : path_(path), options_(options) {
    for (const std::string& file : list_data_files(path, "data.format tfrecord")) {
      if (tfrecord_is_gzip(file))
        throw InputError(file + ": a gzip-compressed TFRecord file has no record offsets to read samples by; "
                                "decompress it (gunzip) to train from it");
      files_.push_back(std::make_unique<TfRecordFile>(file));
      starts_.push_back(count_);
      count_ += files_.back()->size();
    }
  }

  std::string name() const override { return "tfrecord:" + path_; }
  int64_t count() const override { return count_; }

  int64_t read(int64_t i, std::vector<uint8_t>& bytes) const override {
    const auto [file, record] = locate(i);
    thread_local std::vector<uint8_t> payload;
    files_[file]->read(record, payload);
    ExampleFields fields;
    try {
      fields = parse_example(payload.data(), payload.size(), options_.image_key, options_.label_key);
    } catch (const InputError& e) {
      throw InputError(where(i) + ": " + e.what());
    }
    bytes = std::move(fields.image);
    return fields.label - options_.label_offset;
  }

  std::string where(int64_t i) const override {
    const auto [file, record] = locate(i);
    return files_[file]->path() + ": record " + std::to_string(record) + " (from 0)";
  }

 private:
  std::pair<std::size_t, int64_t> locate(int64_t i) const {
    const auto after = std::upper_bound(starts_.begin(), starts_.end(), i);
    const auto file = static_cast<std::size_t>(after - starts_.begin() - 1);
    return {file, i - starts_[file]};
  }

  std::string path_;
  TfRecordSourceOptions options_;
  std::vector<std::unique_ptr<TfRecordFile>> files_;
  std::vector<int64_t> starts_;  // the first sample of each file
  int64_t count_ = 0;
};

class ImageFolderSource final : public EncodedSource {
 public:
  explicit ImageFolderSource(const std::string& root) : root_(root), folder_(list_image_folder(root)) {}
  std::string name() const override { return "image-folder:" + root_; }
  int64_t count() const override { return static_cast<int64_t>(folder_.samples.size()); }
  int num_classes() const override { return static_cast<int>(folder_.classes.size()); }
  int64_t read(int64_t i, std::vector<uint8_t>& bytes) const override {
    const ImageFolderSample& sample = folder_.samples[static_cast<std::size_t>(i)];
    read_whole_file(sample.path, bytes);
    return sample.label;
  }
  std::string where(int64_t i) const override { return folder_.samples[static_cast<std::size_t>(i)].path; }

 private:
  static void read_whole_file(const std::string& path, std::vector<uint8_t>& bytes) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) throw InputError(path + ": cannot open: " + std::strerror(errno));
    bytes.clear();
    uint8_t chunk[1 << 16];
    std::size_t got = 0;
    while ((got = std::fread(chunk, 1, sizeof chunk, f)) > 0) {
      if (bytes.size() + got > static_cast<std::size_t>(kMaxImageFileBytes)) {
        std::fclose(f);
        throw InputError(path + ": larger than " + std::to_string(kMaxImageFileBytes >> 20) + " MiB: not an image");
      }
      bytes.insert(bytes.end(), chunk, chunk + got);
    }
    const bool failed = std::ferror(f) != 0;
    std::fclose(f);
    if (failed) throw InputError(path + ": read error");
  }
  static constexpr int64_t kMaxImageFileBytes = int64_t{256} << 20;

  std::string root_;
  ImageFolder folder_;
};

// The indexed sets' assembler: sample i of the source, read and decoded on the workers.
class DecodingAssembler final : public SampleAssembler {
 public:
  DecodingAssembler(std::shared_ptr<const EncodedSource> source, const EncodedImageOptions& options,
                    int num_classes, const AugmentOptions& augment)
      : source_(std::move(source)), decoder_(options, num_classes, augment) {}

  void assemble(const std::vector<int64_t>& indices, int64_t epoch, Batch& out) override {
    out.indices = indices;
    decoder_.decode(
        indices, epoch,
        [&](int64_t k, std::vector<uint8_t>& scratch, int64_t& label) -> const std::vector<uint8_t>& {
          label = source_->read(indices[static_cast<std::size_t>(k)], scratch);
          return scratch;
        },
        [&](int64_t k) { return source_->where(indices[static_cast<std::size_t>(k)]); }, out);
  }

  int64_t skipped() const override { return decoder_.skipped(); }

 private:
  std::shared_ptr<const EncodedSource> source_;
  BatchDecoder decoder_;
};

// augment.hpp's crop/flip on an interleaved RGB image; the padding is black, as
// torchvision's RandomCrop(padding=4) pads.
void crop_flip_rgb(const std::vector<uint8_t>& src, std::vector<uint8_t>& dst, int size, int pad,
                   const CropFlip& cf) {
  dst.assign(src.size(), 0);
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x) {
      const int64_t from = crop_flip_source(cf, pad, size, size, y, x);
      if (from < 0) continue;
      const std::size_t to = (static_cast<std::size_t>(y) * size + x) * 3;
      for (int c = 0; c < 3; ++c) dst[to + c] = src[static_cast<std::size_t>(from) * 3 + c];
    }
}

}  // namespace

struct BatchDecoder::State {
  State(const EncodedImageOptions& o, int classes, const AugmentOptions& a)
      : options(o), num_classes(classes), augment(a), workers(static_cast<std::size_t>(o.workers)), pool(o.workers) {}

  struct Worker {
    ImageDecoder decoder;
    std::vector<uint8_t> bytes;
    std::vector<uint8_t> shifted;
  };

  int32_t decode_sample(const std::vector<uint8_t>& bytes, int64_t label, int64_t key, int64_t epoch,
                        const std::string& where, Worker& worker, float* out) {
    if (label < 0 || label >= num_classes)
      throw InputError(where + ": label " + std::to_string(label) + " is outside [0, " + std::to_string(num_classes) +
                       ") (model.num_classes; labels counted from 1 need data.label_offset: 1)");
    const int size = options.image_size;
    const ImageInfo info = read_image_info(bytes.data(), bytes.size(), where);
    DecodedImage image;
    if (augment.enabled && augment.random_resized_crop) {
      std::mt19937_64 rng = sample_rng(augment.seed, epoch, key);
      const CropBox box = random_resized_crop_box(info.width, info.height, rng, options.crop);
      image = worker.decoder.decode_crop(bytes.data(), bytes.size(), box, size, size, where);
      if (augment.flip && random_flip(rng)) flip_horizontal(image.pixels.data(), size, size);
    } else {
      const ResizeCenterCrop eval = resize_shorter_then_center_crop(info.width, info.height, options.resize, size);
      image = worker.decoder.decode_window(bytes.data(), bytes.size(), eval.source_window(info.width, info.height),
                                           size, size, where);
      if (augment.enabled) {  // CIFAR's padded crop + flip, drawn as the in-memory sets draw it
        crop_flip_rgb(image.pixels, worker.shifted, size, augment.pad, draw_crop_flip(augment, epoch, key));
        std::swap(image.pixels, worker.shifted);
      }
    }
    normalize_image(image.pixels.data(), size, size, options.normalization, TensorLayout::kChw, TensorType::kF32,
                    out);
    return static_cast<int32_t>(label);
  }

  // Each bad slot takes a copy of the batch's first good sample, so that every rank still
  // steps with a full batch; a batch with no good sample cannot be filled.
  void replace_bad_samples(Batch& out, int64_t per_image, const Where& where) {
    const auto good = std::find(bad.begin(), bad.end(), 0);
    const int64_t count = std::count(bad.begin(), bad.end(), 1);
    if (count == 0) return;
    if (good == bad.end())
      throw InputError("every sample of a batch of " + std::to_string(bad.size()) + " was bad (" + where(0) +
                       " first): the data set is not readable");
    const auto g = static_cast<std::size_t>(good - bad.begin());
    float* images = out.images.data<float>();
    for (std::size_t k = 0; k < bad.size(); ++k)
      if (bad[k]) {
        std::copy(images + g * per_image, images + (g + 1) * per_image, images + k * per_image);
        out.labels[k] = out.labels[g];
      }
    skipped += count;
  }

  EncodedImageOptions options;
  int num_classes;
  AugmentOptions augment;
  std::vector<Worker> workers;
  std::vector<char> bad;  // per slot of the batch being decoded
  int64_t skipped = 0;
  WorkerPool pool;  // last: its threads stop before the workers' state goes
};

BatchDecoder::BatchDecoder(const EncodedImageOptions& options, int num_classes, const AugmentOptions& augment)
    : state_(std::make_unique<State>(options, num_classes, augment)) {}

BatchDecoder::~BatchDecoder() = default;

int64_t BatchDecoder::skipped() const {
  return state_->skipped;
}

void BatchDecoder::decode(const std::vector<int64_t>& keys, int64_t epoch, const Read& read, const Where& where,
                          Batch& out) {
  State& s = *state_;
  const int size = s.options.image_size;
  const auto batch = static_cast<int64_t>(keys.size());
  out.labels.resize(keys.size());
  out.shape_images(batch, 3, size, size);
  float* images = out.images.data<float>();
  const int64_t per_image = int64_t{3} * size * size;
  s.bad.assign(keys.size(), 0);
  s.pool.run(batch, [&](int64_t k, int w) {
    State::Worker& worker = s.workers[static_cast<std::size_t>(w)];
    auto decode_one = [&] {
      int64_t label = 0;
      const std::vector<uint8_t>& bytes = read(k, worker.bytes, label);
      out.labels[k] = s.decode_sample(bytes, label, keys[static_cast<std::size_t>(k)], epoch, where(k), worker,
                                      images + k * per_image);
    };
    if (!s.options.skip_bad_records) return decode_one();
    try {
      decode_one();
    } catch (const InputError& e) {
      s.bad[k] = 1;
      log_warn(std::string(e.what()) + ": skipped (data.on_bad_record: skip)");
    }
  });
  s.replace_bad_samples(out, per_image, where);
}

std::unique_ptr<EncodedSource> open_image_folder_source(const std::string& root) {
  return std::make_unique<ImageFolderSource>(root);
}

std::unique_ptr<EncodedSource> open_tfrecord_source(const std::string& path, const TfRecordSourceOptions& options) {
  return std::make_unique<TfRecordSource>(path, options);
}

EncodedImageSet::EncodedImageSet(std::shared_ptr<const EncodedSource> source, const EncodedImageOptions& options)
    : source_(std::move(source)), options_(options) {
  num_classes_ = source_->num_classes() > 0 ? source_->num_classes() : options.num_classes;
  if (source_->count() == 0) throw InputError(source_->name() + ": no samples");
  options_ = checked_image_options(source_->name(), options_, num_classes_);
}

EncodedImageOptions checked_image_options(const std::string& set_name, EncodedImageOptions options, int num_classes) {
  if (num_classes <= 0) throw InputError(set_name + ": the number of classes is not known (model.num_classes)");
  if (options.image_size < 1 || options.resize < options.image_size)
    throw InputError("data.image_size " + std::to_string(options.image_size) + " and data.resize " +
                     std::to_string(options.resize) + ": need 1 <= image_size <= resize");
  options.workers = std::max(1, options.workers);
  return options;
}

std::unique_ptr<SampleAssembler> EncodedImageSet::make_assembler(const AugmentOptions& augment) const {
  return std::make_unique<DecodingAssembler>(source_, options_, num_classes_, augment);
}

}  // namespace sdp
