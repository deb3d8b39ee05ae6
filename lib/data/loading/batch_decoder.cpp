// BatchDecoder (batch_decoder.hpp).
#include "data/loading/batch_decoder.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "core/log.hpp"
#include "data/images/image_decode.hpp"
#include "data/loading/worker_pool.hpp"

namespace sdp {

namespace {

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

EncodedImageOptions checked_image_options(const std::string& set_name, EncodedImageOptions options, int num_classes) {
  if (num_classes <= 0) throw InputError(set_name + ": the number of classes is not known (model.num_classes)");
  if (options.image_size < 1 || options.resize < options.image_size)
    throw InputError("data.image_size " + std::to_string(options.image_size) + " and data.resize " +
                     std::to_string(options.resize) + ": need 1 <= image_size <= resize");
  options.workers = std::max(1, options.workers);
  return options;
}

}  // namespace sdp
