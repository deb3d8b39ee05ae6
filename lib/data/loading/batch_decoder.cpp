// BatchDecoder (batch_decoder.hpp).
#include "data/loading/batch_decoder.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/error.hpp"
#include "core/log.hpp"
#include "data/images/image_decode.hpp"
#include "data/loading/worker_pool.hpp"

namespace sdp {

namespace {

// normalize_with's element type (NormalizationTable) for a batch's dtype.
TensorType tensor_type(DType dtype) {
  switch (dtype) {
    case DType::kF16: return TensorType::kF16;
    case DType::kBF16: return TensorType::kBF16;
    default: return TensorType::kF32;
  }
}

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

SampleTransform plan_sample_transform(const EncodedImageOptions& options, const AugmentOptions& augment, int width,
                                      int height, int64_t key, int64_t epoch) {
  SampleTransform t;
  if (augment.enabled && augment.random_resized_crop) {
    std::mt19937_64 rng = sample_rng(augment.seed, epoch, key);
    t.window = SampleWindow::of_box(random_resized_crop_box(width, height, rng, options.crop));
    t.flip = augment.flip && random_flip(rng);
    return t;
  }
  t.window = resize_shorter_then_center_crop(width, height, options.resize, options.image_size)
                 .source_window(width, height);
  if (augment.enabled) {  // CIFAR's padded crop + flip, drawn as the in-memory sets draw it
    t.pad_crop = true;
    t.crop_flip = draw_crop_flip(augment, epoch, key);
  }
  return t;
}

struct BatchDecoder::State {
  State(const EncodedImageOptions& o, int classes, const AugmentOptions& a)
      : options(o), num_classes(classes), augment(a), workers(static_cast<std::size_t>(o.workers)), pool(o.workers) {}

  struct Worker {
    ImageDecoder decoder;
    std::vector<uint8_t> bytes;
    std::vector<uint8_t> shifted;
  };
  // One sample of the batch between the phases of an offloaded decode.
  struct Slot {
    std::vector<uint8_t> scratch;
    const std::vector<uint8_t>* bytes = nullptr;
    int64_t label = 0;
    ImageInfo info;
    SampleTransform transform;
    bool offered = false;  // handed to the offload
    bool normalized = false;  // ... with the batch's slot to write, normalised
    OffloadOutcome outcome = OffloadOutcome::kRefused;
    std::vector<uint8_t> pixels;
  };

  // Sample k's bytes, label and transform (the first phase, on a worker).
  void prepare(int64_t k, int64_t key, int64_t epoch, const Read& read, const std::string& where, Slot& slot) {
    slot.bytes = &read(k, slot.scratch, slot.label);
    check_label(slot.label, where);
    slot.info = read_image_info(slot.bytes->data(), slot.bytes->size(), where);
    slot.transform = plan_sample_transform(options, augment, slot.info.width, slot.info.height, key, epoch);
    // nvJPEG's RGB output takes colour and grey JPEGs; CMYK and PNG stay on the CPU.
    slot.offered = slot.info.format == ImageFormat::kJpeg && (slot.info.channels == 3 || slot.info.channels == 1);
    slot.outcome = OffloadOutcome::kRefused;
    slot.normalized = false;
  }

  void check_label(int64_t label, const std::string& where) const {
    if (label < 0 || label >= num_classes)
      throw InputError(where + ": label " + std::to_string(label) + " is outside [0, " + std::to_string(num_classes) +
                       ") (model.num_classes; labels counted from 1 need data.label_offset: 1)");
  }

  // The image at the output size as `t` says, decoded here.
  void decode_on_cpu(const std::vector<uint8_t>& bytes, const SampleTransform& t, const std::string& where,
                     Worker& worker, std::vector<uint8_t>& pixels) {
    const int size = options.image_size;
    DecodedImage image = worker.decoder.decode_window(bytes.data(), bytes.size(), t.window, size, size, where);
    if (t.flip) flip_horizontal(image.pixels.data(), size, size);
    pixels = std::move(image.pixels);
  }

  // CIFAR's padded crop, then the normalisation into the batch (the last phase).
  void finish(const SampleTransform& t, std::vector<uint8_t>& pixels, Worker& worker, void* out) {
    const int size = options.image_size;
    if (t.pad_crop) {
      crop_flip_rgb(pixels, worker.shifted, size, augment.pad, t.crop_flip);
      std::swap(pixels, worker.shifted);
    }
    normalize_with(table, pixels.data(), size, size, out);
  }

  // Whether the offload writes normalised samples (asked once: data.normalize: gpu).
  bool offload_normalizes() {
    if (!normalization_asked) {
      normalization_asked = true;
      offload_took_normalization = options.normalize_on_offload && options.offload->set_normalization(table);
    }
    return offload_took_normalization;
  }

  // Without an offload: one pass per sample.
  int32_t decode_sample(const std::vector<uint8_t>& bytes, int64_t label, int64_t key, int64_t epoch,
                        const std::string& where, Worker& worker, void* out) {
    check_label(label, where);
    const ImageInfo info = read_image_info(bytes.data(), bytes.size(), where);
    const SampleTransform t = plan_sample_transform(options, augment, info.width, info.height, key, epoch);
    std::vector<uint8_t> pixels;
    decode_on_cpu(bytes, t, where, worker, pixels);
    finish(t, pixels, worker, out);
    return static_cast<int32_t>(label);
  }

  // Runs body(k) for slot k unless it is already bad; with skip_bad_records a bad sample is
  // marked and warned about instead of ending the job.
  template <class Body>
  void guarded(int64_t k, Body&& body) {
    if (bad[static_cast<std::size_t>(k)]) return;
    if (!options.skip_bad_records) return body();
    try {
      body();
    } catch (const InputError& e) {
      bad[static_cast<std::size_t>(k)] = 1;
      log_warn(std::string(e.what()) + ": skipped (data.on_bad_record: skip)");
    }
  }

  // Each bad slot takes a copy of the batch's first good sample, so that every rank still
  // steps with a full batch; a batch with no good sample cannot be filled.
  void replace_bad_samples(Batch& out, std::size_t image_bytes, const Where& where) {
    const auto good = std::find(bad.begin(), bad.end(), 0);
    const int64_t count = std::count(bad.begin(), bad.end(), 1);
    if (count == 0) return;
    if (good == bad.end())
      throw InputError("every sample of a batch of " + std::to_string(bad.size()) + " was bad (" + where(0) +
                       " first): the data set is not readable");
    const auto g = static_cast<std::size_t>(good - bad.begin());
    auto* images = static_cast<char*>(out.images.raw());
    for (std::size_t k = 0; k < bad.size(); ++k)
      if (bad[k]) {
        std::memcpy(images + k * image_bytes, images + g * image_bytes, image_bytes);
        out.labels[k] = out.labels[g];
      }
    skipped += count;
  }

  EncodedImageOptions options;
  int num_classes;
  AugmentOptions augment;
  // The batch's normalisation, every value it can take (normalize_with).
  NormalizationTable table = normalization_table(
      options.normalization, options.batch_channels_last ? TensorLayout::kHwc : TensorLayout::kChw,
      tensor_type(options.batch_dtype));
  bool normalization_asked = false, offload_took_normalization = false;
  std::vector<Worker> workers;
  std::vector<Slot> slots;  // offloaded batches only
  std::vector<char> bad;    // per slot of the batch being decoded
  int64_t skipped = 0;
  std::atomic<int64_t> cpu_decoded{0};
  WorkerPool pool;  // last: its threads stop before the workers' state goes
};

BatchDecoder::BatchDecoder(const EncodedImageOptions& options, int num_classes, const AugmentOptions& augment)
    : state_(std::make_unique<State>(options, num_classes, augment)) {}

BatchDecoder::~BatchDecoder() = default;

int64_t BatchDecoder::skipped() const {
  return state_->skipped;
}

int64_t BatchDecoder::cpu_decoded() const {
  return state_->cpu_decoded.load();
}

void BatchDecoder::decode(const std::vector<int64_t>& keys, int64_t epoch, const Read& read, const Where& where,
                          Batch& out) {
  State& s = *state_;
  const int size = s.options.image_size;
  const auto batch = static_cast<int64_t>(keys.size());
  out.labels.resize(keys.size());
  out.shape_images(batch, 3, size, size, s.options.batch_dtype, s.options.batch_channels_last);
  auto* images = static_cast<char*>(out.images.raw());
  const int64_t per_image = int64_t{3} * size * size;
  const std::size_t image_bytes = static_cast<std::size_t>(per_image) * dtype_size(s.options.batch_dtype);
  s.bad.assign(keys.size(), 0);
  const auto key = [&](int64_t k) { return keys[static_cast<std::size_t>(k)]; };
  if (!s.options.offload) {
    s.pool.run(batch, [&](int64_t k, int w) {
      State::Worker& worker = s.workers[static_cast<std::size_t>(w)];
      s.guarded(k, [&] {
        int64_t label = 0;
        const std::vector<uint8_t>& bytes = read(k, worker.bytes, label);
        out.labels[k] = s.decode_sample(bytes, label, key(k), epoch, where(k), worker, images + k * image_bytes);
      });
    });
    s.replace_bad_samples(out, image_bytes, where);
    return;
  }
  // Offloaded: read, parse and draw here; the offload decodes the JPEGs it takes; the CPU
  // decodes the rest; every sample is finished (padded crop, normalisation) here.
  if (s.slots.size() < keys.size()) s.slots.resize(keys.size());
  s.pool.run(batch, [&](int64_t k, int) {
    s.guarded(k, [&] { s.prepare(k, key(k), epoch, read, where(k), s.slots[static_cast<std::size_t>(k)]); });
  });
  std::vector<OffloadJob> jobs;
  std::vector<std::size_t> job_slot;
  const bool offload_normalizes = s.offload_normalizes();
  for (std::size_t k = 0; k < keys.size(); ++k) {
    State::Slot& slot = s.slots[k];
    if (s.bad[k] || !slot.offered) continue;
    slot.pixels.resize(static_cast<std::size_t>(per_image));
    // CIFAR's padded crop comes after the decode: those samples are finished here.
    slot.normalized = offload_normalizes && !slot.transform.pad_crop;
    jobs.push_back({slot.bytes->data(), slot.bytes->size(), slot.info.width, slot.info.height, slot.transform.window,
                    size, size, slot.transform.flip, slot.pixels.data(),
                    slot.normalized ? images + k * image_bytes : nullptr});
    job_slot.push_back(k);
  }
  if (!jobs.empty()) {
    const std::vector<OffloadOutcome> outcomes = s.options.offload->decode(jobs);
    for (std::size_t j = 0; j < jobs.size(); ++j) s.slots[job_slot[j]].outcome = outcomes.at(j);
  }
  s.pool.run(batch, [&](int64_t k, int w) {
    State::Worker& worker = s.workers[static_cast<std::size_t>(w)];
    State::Slot& slot = s.slots[static_cast<std::size_t>(k)];
    s.guarded(k, [&] {
      if (slot.outcome == OffloadOutcome::kCorrupt)
        throw InputError(where(k) + ": corrupt JPEG (" + s.options.offload->describe() + " could not decode it)");
      if (slot.outcome == OffloadOutcome::kRefused) {
        s.decode_on_cpu(*slot.bytes, slot.transform, where(k), worker, slot.pixels);
        ++s.cpu_decoded;
      }
      // A sample the offload decoded into the batch, normalised, is finished.
      if (!(slot.outcome == OffloadOutcome::kDecoded && slot.normalized))
        s.finish(slot.transform, slot.pixels, worker, images + k * image_bytes);
      out.labels[k] = static_cast<int32_t>(slot.label);
    });
  });
  s.replace_bad_samples(out, image_bytes, where);
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
