#include "data/encoded_images.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.hpp"
#include "core/log.hpp"
#include "data/data_files.hpp"
#include "data/image_decode.hpp"
#include "data/image_folder.hpp"
#include "data/tf_example.hpp"
#include "data/tfrecord.hpp"
#include "data/worker_pool.hpp"

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

// One loader's decoding: a pool of workers, each with its own decoder and byte buffer.
class DecodingAssembler final : public SampleAssembler {
 public:
  DecodingAssembler(std::shared_ptr<const EncodedSource> source, const EncodedImageOptions& options,
                    int num_classes, const AugmentOptions& augment)
      : source_(std::move(source)),
        options_(options),
        num_classes_(num_classes),
        augment_(augment),
        workers_(static_cast<std::size_t>(options.workers)),
        pool_(options.workers) {}

  void assemble(const std::vector<int64_t>& indices, int64_t epoch, Batch& out) override {
    const int size = options_.image_size;
    const int64_t batch = static_cast<int64_t>(indices.size());
    out.indices = indices;
    out.labels.resize(indices.size());
    out.shape_images(batch, 3, size, size);
    float* images = out.images.data<float>();
    const int64_t per_image = int64_t{3} * size * size;
    bad_.assign(indices.size(), 0);
    pool_.run(batch, [&](int64_t k, int w) {
      if (!options_.skip_bad_records) {
        out.labels[k] = decode_sample(indices[k], epoch, workers_[w], images + k * per_image);
        return;
      }
      try {
        out.labels[k] = decode_sample(indices[k], epoch, workers_[w], images + k * per_image);
      } catch (const InputError& e) {
        bad_[k] = 1;
        log_warn(std::string(e.what()) + ": skipped (data.on_bad_record: skip)");
      }
    });
    replace_bad_samples(out, per_image);
  }

  int64_t skipped() const override { return skipped_; }

 private:
  // Each bad slot takes a copy of the batch's first good sample, so that every rank still
  // steps with a full batch; a batch with no good sample cannot be filled.
  void replace_bad_samples(Batch& out, int64_t per_image) {
    const auto good = std::find(bad_.begin(), bad_.end(), 0);
    const int64_t bad = std::count(bad_.begin(), bad_.end(), 1);
    if (bad == 0) return;
    if (good == bad_.end())
      throw InputError("every sample of a batch of " + std::to_string(bad_.size()) + " was bad (" +
                       source_->where(out.indices.front()) + " first): the data set is not readable");
    const auto g = static_cast<std::size_t>(good - bad_.begin());
    float* images = out.images.data<float>();
    for (std::size_t k = 0; k < bad_.size(); ++k)
      if (bad_[k]) {
        std::copy(images + g * per_image, images + (g + 1) * per_image, images + k * per_image);
        out.labels[k] = out.labels[g];
      }
    skipped_ += bad;
  }

  struct Worker {
    ImageDecoder decoder;
    std::vector<uint8_t> bytes;
    std::vector<uint8_t> shifted;
  };

  // augment.hpp's crop/flip on an interleaved RGB image; the padding is black, as
  // torchvision's RandomCrop(padding=4) pads.
  static void crop_flip_rgb(const std::vector<uint8_t>& src, std::vector<uint8_t>& dst, int size, int pad,
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

  int32_t decode_sample(int64_t i, int64_t epoch, Worker& worker, float* out) {
    const int64_t label = source_->read(i, worker.bytes);
    const std::string where = source_->where(i);
    if (label < 0 || label >= num_classes_)
      throw InputError(where + ": label " + std::to_string(label) + " is outside [0, " + std::to_string(num_classes_) +
                       ") (model.num_classes; labels counted from 1 need data.label_offset: 1)");
    const int size = options_.image_size;
    const ImageInfo info = read_image_info(worker.bytes.data(), worker.bytes.size(), where);
    DecodedImage image;
    if (augment_.enabled && augment_.random_resized_crop) {
      std::mt19937_64 rng = sample_rng(augment_.seed, epoch, i);
      const CropBox box = random_resized_crop_box(info.width, info.height, rng, options_.crop);
      image = worker.decoder.decode_crop(worker.bytes.data(), worker.bytes.size(), box, size, size, where);
      if (augment_.flip && random_flip(rng)) flip_horizontal(image.pixels.data(), size, size);
    } else {
      const ResizeCenterCrop eval = resize_shorter_then_center_crop(info.width, info.height, options_.resize, size);
      image = worker.decoder.decode_window(worker.bytes.data(), worker.bytes.size(),
                                           eval.source_window(info.width, info.height), size, size, where);
      if (augment_.enabled) {  // CIFAR's padded crop + flip, drawn as the in-memory sets draw it
        crop_flip_rgb(image.pixels, worker.shifted, size, augment_.pad, draw_crop_flip(augment_, epoch, i));
        std::swap(image.pixels, worker.shifted);
      }
    }
    normalize_image(image.pixels.data(), size, size, options_.normalization, TensorLayout::kChw, TensorType::kF32,
                    out);
    return static_cast<int32_t>(label);
  }

  std::shared_ptr<const EncodedSource> source_;
  EncodedImageOptions options_;
  int num_classes_;
  AugmentOptions augment_;
  std::vector<Worker> workers_;
  std::vector<char> bad_;  // per slot of the batch being assembled
  int64_t skipped_ = 0;
  WorkerPool pool_;  // last: its threads stop before the workers' state goes
};

}  // namespace

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
  if (num_classes_ <= 0) throw InputError(source_->name() + ": the number of classes is not known (model.num_classes)");
  if (options_.image_size < 1 || options_.resize < options_.image_size)
    throw InputError("data.image_size " + std::to_string(options_.image_size) + " and data.resize " +
                     std::to_string(options_.resize) + ": need 1 <= image_size <= resize");
  options_.workers = std::max(1, options_.workers);
}

std::unique_ptr<SampleAssembler> EncodedImageSet::make_assembler(const AugmentOptions& augment) const {
  return std::make_unique<DecodingAssembler>(source_, options_, num_classes_, augment);
}

}  // namespace sdp
