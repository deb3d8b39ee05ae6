// SampleSource: what a job trains or evaluates on, whatever the format; it makes its own
// loaders (data_loader.hpp). Two kinds:
// - SampleSet: read by sample index: an in-memory Dataset of raw pixels (MNIST, CIFAR-10,
//   synthetic) or a set of encoded images read by offset (plain TFRecord files, image folders,
//   decoded as batches are assembled). Their loaders' sampling, sharding across ranks,
//   prefetching and checkpoint cursors are the same for every kind; only the assembler, which
//   turns indices into a normalized batch, differs.
// - streamed sets (stream_loader.hpp): shards read in order through a shuffle buffer (tar
//   shards, gzip TFRecords).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/images/augment.hpp"
#include "data/loading/batch.hpp"
#include "data/sets/dataset.hpp"

namespace sdp {

class TrainLoader;
class EvalLoader;
struct LoaderOptions;

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual std::string name() const = 0;  // "cifar10/train", "tfrecord:/data/train", ...
  virtual int64_t count() const = 0;
  virtual int num_classes() const = 0;
  // The classes' names by label when the set has them (an image folder's class folders, in
  // torchvision's order); empty otherwise.
  virtual std::vector<std::string> class_names() const { return {}; }
  // One assembled sample is [channels, height, width].
  virtual int channels() const = 0;
  virtual int height() const = 0;
  virtual int width() const = 0;
  // One line for the log: the name, the samples, and how they are read.
  virtual std::string describe() const { return name() + ": " + std::to_string(count()) + " samples"; }
  // This rank's training loader, and its evaluation loader (every sample of the set read once
  // over all ranks). The source must outlive them.
  virtual std::unique_ptr<TrainLoader> make_train_loader(const LoaderOptions& options) const = 0;
  virtual std::unique_ptr<EvalLoader> make_eval_loader(int64_t batch_size, int rank, int world,
                                                       int prefetch) const = 0;
};

class SampleAssembler {
 public:
  virtual ~SampleAssembler() = default;
  // Fills out.images ([B, C, H, W] f32, normalized), out.labels and out.indices for
  // `indices`; `epoch` keys the augmentation draw. Called from one loader's worker thread.
  // Throws InputError naming the file and record of a sample that cannot be read.
  virtual void assemble(const std::vector<int64_t>& indices, int64_t epoch, Batch& out) = 0;
  // Samples that could not be read and were replaced (data.on_bad_record: skip), so far.
  virtual int64_t skipped() const { return 0; }
  // Images a JPEG offload refused, decoded on the CPU, so far (data.decode: gpu).
  virtual int64_t cpu_decoded() const { return 0; }
};

// A set read by sample index; its loaders are data_loader.hpp's IndexedTrainLoader and
// IndexedEvalLoader.
class SampleSet : public SampleSource {
 public:
  std::unique_ptr<TrainLoader> make_train_loader(const LoaderOptions& options) const override;
  std::unique_ptr<EvalLoader> make_eval_loader(int64_t batch_size, int rank, int world, int prefetch) const override;
  // A loader's assembler: training transforms when augment.enabled (keyed by augment.seed),
  // evaluation's otherwise.
  virtual std::unique_ptr<SampleAssembler> make_assembler(const AugmentOptions& augment) const = 0;
};

// An in-memory Dataset as a SampleSet (its assembler: BatchAssembler).
class DatasetSamples final : public SampleSet {
 public:
  explicit DatasetSamples(Dataset dataset) : dataset_(std::make_shared<const Dataset>(std::move(dataset))) {}
  // A view of `dataset`, which must outlive this object and its assemblers.
  static DatasetSamples view(const Dataset& dataset) { return DatasetSamples(&dataset); }

  const Dataset& dataset() const { return *dataset_; }
  std::string name() const override { return dataset_->name; }
  int64_t count() const override { return dataset_->count; }
  int num_classes() const override { return dataset_->num_classes; }
  int channels() const override { return dataset_->channels; }
  int height() const override { return dataset_->height; }
  int width() const override { return dataset_->width; }
  std::unique_ptr<SampleAssembler> make_assembler(const AugmentOptions& augment) const override;

 private:
  explicit DatasetSamples(const Dataset* borrowed) : dataset_(borrowed, [](const Dataset*) {}) {}
  std::shared_ptr<const Dataset> dataset_;
};

}  // namespace sdp
