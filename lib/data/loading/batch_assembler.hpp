// BatchAssembler: dataset indices -> normalized float NCHW batch, with optional
// crop/flip augmentation fused into the same pass. Normalization is a lookup in a
// 256-entry table per channel, computed in float exactly like torchvision
// (v / 255.f - mean) / std, so the pixels match a PyTorch pipeline bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "data/images/augment.hpp"
#include "data/loading/batch.hpp"
#include "data/sets/dataset.hpp"
#include "data/sets/sample_set.hpp"

namespace sdp {

class BatchAssembler final : public SampleAssembler {
 public:
  // `dataset` must outlive the assembler.
  BatchAssembler(const Dataset& dataset, const AugmentOptions& augment = {});

  const Dataset& dataset() const { return dataset_; }
  // Fills out.images, out.labels and out.indices; reuses out.storage when large enough.
  // `epoch` keys the augmentation draw.
  void assemble(const std::vector<int64_t>& indices, int64_t epoch, Batch& out) override;

 private:
  const Dataset& dataset_;
  AugmentOptions augment_;
  std::vector<float> lut_;  // [channel][byte value]
};

}  // namespace sdp
