#include "data/sets/encoded_images.hpp"

#include "core/error.hpp"

namespace sdp {

namespace {

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
  int64_t cpu_decoded() const override { return decoder_.cpu_decoded(); }

 private:
  std::shared_ptr<const EncodedSource> source_;
  BatchDecoder decoder_;
};

}  // namespace

EncodedImageSet::EncodedImageSet(std::shared_ptr<const EncodedSource> source, const EncodedImageOptions& options)
    : source_(std::move(source)), options_(options) {
  num_classes_ = source_->num_classes() > 0 ? source_->num_classes() : options.num_classes;
  if (source_->count() == 0) throw InputError(source_->name() + ": no samples");
  options_ = checked_image_options(source_->name(), options_, num_classes_);
}

std::unique_ptr<SampleAssembler> EncodedImageSet::make_assembler(const AugmentOptions& augment) const {
  return std::make_unique<DecodingAssembler>(source_, options_, num_classes_, augment);
}

}  // namespace sdp
