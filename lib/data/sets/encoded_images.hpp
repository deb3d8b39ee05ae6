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
#include <memory>
#include <string>
#include <vector>

#include "data/loading/batch_decoder.hpp"
#include "data/sets/encoded_source.hpp"
#include "data/sets/sample_set.hpp"

namespace sdp {

class EncodedImageSet final : public SampleSet {
 public:
  // Throws InputError when the source is empty or no class count is known.
  EncodedImageSet(std::shared_ptr<const EncodedSource> source, const EncodedImageOptions& options);
  std::string name() const override { return source_->name(); }
  int64_t count() const override { return source_->count(); }
  int num_classes() const override { return num_classes_; }
  std::vector<std::string> class_names() const override { return source_->class_names(); }
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
