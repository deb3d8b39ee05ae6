// Encoded image sets: samples whose bytes are JPEG or PNG, read by index from records or
// files and decoded as each batch is assembled (docs/data-formats.md). ImageNet does not fit in a rank's
// memory; only the records of the batches in flight are, so a rank's memory is bounded by
// data.prefetch batches whatever the set's size.
//
// Transforms, torchvision's (data/image_transforms.hpp): training takes RandomResizedCrop
// (scale 0.08-1, ratio 3/4-4/3) to image_size x image_size and a horizontal flip
// (AugmentOptions::random_resized_crop), or the evaluation transform then CIFAR's padded crop
// and flip (augment.hpp), each drawn from (seed, epoch, sample) alone, so a resumed job
// augments as an uninterrupted one; evaluation takes Resize(shorter side = resize) and
// CenterCrop(image_size). The JPEG decoder reads only
// the DCT scale and the region a crop needs. Output: normalized f32 CHW.
//
// Decoding runs on a pool of data.workers threads, the loader's own thread among them; each
// worker keeps its decoder. A sample that cannot be read or decoded, or whose label is out of
// [0, num_classes), is an InputError naming its file and record, or (skip_bad_records) is
// replaced by a good sample of its batch and counted: the batch keeps its size on every rank.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/loading/batch.hpp"
#include "data/sets/dataset.hpp"
#include "data/images/image_transforms.hpp"
#include "data/sets/sample_set.hpp"

namespace sdp {

// Where sample i's encoded image and label come from.
class EncodedSource {
 public:
  virtual ~EncodedSource() = default;
  virtual std::string name() const = 0;
  virtual int64_t count() const = 0;
  // Classes the source itself knows (an image folder's class directories); 0 when it does
  // not (records carry labels only): then the job's model.num_classes bounds them.
  virtual int num_classes() const { return 0; }
  // Sample i's encoded bytes (into `bytes`, reused) and label. Called by several workers at
  // once. Throws InputError naming the file and record.
  virtual int64_t read(int64_t i, std::vector<uint8_t>& bytes) const = 0;
  // Names sample i in an error ("FILE record R (from 0)", or the image's path).
  virtual std::string where(int64_t i) const = 0;
};

struct TfRecordSourceOptions {
  std::string image_key = "image/encoded";
  std::string label_key = "image/class/label";
  int64_t label_offset = 0;  // subtracted from every label (ImageNet's TFRecords count from 1)
};

// The TFRecord files under `path` (itself when a file; a directory's files sorted by name,
// `.idx` and hidden files skipped), every record a tf.train.Example. Each file is indexed
// (tfrecord.hpp's <file>.idx, made on first use) and read by offset. Throws InputError for a
// missing path, a directory with no file, a gzip file (no offsets: decompress it) or a
// defect the index scan meets.
std::unique_ptr<EncodedSource> open_tfrecord_source(const std::string& path, const TfRecordSourceOptions& options);

// A torchvision ImageFolder tree, root/<class>/.../<image> (data/image_folder.hpp): labels
// are the sorted class folders' indices, as in PyTorch. Throws what list_image_folder throws.
std::unique_ptr<EncodedSource> open_image_folder_source(const std::string& root);

struct EncodedImageOptions {
  int image_size = 224;  // the square crop the model reads
  int resize = 256;      // evaluation: the shorter side before the centre crop
  int num_classes = 0;   // labels must lie in [0, num_classes); the source's own count wins
  int workers = 1;       // decoding threads per loader, its own thread included
  // A sample that cannot be read or decoded: false ends the job (InputError); true replaces it
  // in its batch by a good sample of the same batch, warns naming it, and counts it.
  bool skip_bad_records = false;
  Normalization normalization{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};  // ImageNet's
  RandomResizedCropOptions crop;
};

// `options` checked for a set named `set_name` whose labels lie in [0, num_classes), with at
// least one worker. Throws InputError when num_classes is not known (<= 0) or image_size and
// resize do not fit (1 <= image_size <= resize).
EncodedImageOptions checked_image_options(const std::string& set_name, EncodedImageOptions options, int num_classes);

// One loader's decoding of batches of encoded images (the indexed sets' assembler and the
// streamed sets' loaders share it): a pool of options.workers threads, each with its own
// decoder, applying the training or evaluation transform, with options.skip_bad_records.
class BatchDecoder {
 public:
  BatchDecoder(const EncodedImageOptions& options, int num_classes, const AugmentOptions& augment);
  ~BatchDecoder();
  BatchDecoder(const BatchDecoder&) = delete;
  BatchDecoder& operator=(const BatchDecoder&) = delete;

  // Sample k's encoded bytes (read into `scratch`, or a buffer of the caller's) and its label.
  // Called by several workers at once. Throws InputError naming the sample.
  using Read = std::function<const std::vector<uint8_t>&(int64_t k, std::vector<uint8_t>& scratch, int64_t& label)>;
  // Names sample k in an error: its file and record, or its path.
  using Where = std::function<std::string(int64_t k)>;

  // Decodes and transforms samples 0 .. keys.size() - 1 into out.images ([B, 3, S, S] f32,
  // normalized) and out.labels; keys[k] and `epoch` key sample k's random augmentation.
  // out.indices is the caller's. Throws InputError for a bad sample (or, skipping, for a batch
  // with no good sample).
  void decode(const std::vector<int64_t>& keys, int64_t epoch, const Read& read, const Where& where, Batch& out);
  // Samples replaced so far (skip_bad_records).
  int64_t skipped() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

class EncodedImageSet final : public SampleSet {
 public:
  // Throws InputError when the source is empty or no class count is known.
  EncodedImageSet(std::shared_ptr<const EncodedSource> source, const EncodedImageOptions& options);
  std::string name() const override { return source_->name(); }
  int64_t count() const override { return source_->count(); }
  int num_classes() const override { return num_classes_; }
  int channels() const override { return 3; }
  int height() const override { return options_.image_size; }
  int width() const override { return options_.image_size; }
  std::unique_ptr<SampleAssembler> make_assembler(const AugmentOptions& augment) const override;

 private:
  std::shared_ptr<const EncodedSource> source_;
  EncodedImageOptions options_;
  int num_classes_;
};

}  // namespace sdp
