// Batch: one rank's share of a step, ready for the model.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.hpp"
#include "data/loading/sampler.hpp"

namespace sdp {

struct Batch {
  // Normalized, a view of `storage`: [B, C, H, W] f32, or in a 16-bit model's compute type
  // channels-last [B, H, W, C] (data.batch_type: compute; the first layer's own input).
  Tensor images;
  std::vector<int32_t> labels;   // B
  std::vector<int64_t> indices;  // B dataset indices, in batch order
  int64_t step = 0;              // 0-based position in the current iteration
  int micro = 0;                 // training: micro-batch of its step (train.accumulate_steps)
  SampleCursor cursor;           // training: where this step's global batch starts
  SampleCursor next_cursor;      // training: checkpoint this after the step succeeded
  Tensor storage;                // reused across batches; grows, never shrinks
  bool pinned = false;           // storage in page-locked memory (a GPU model copies it in async)

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  // Points `images` at [b, c, h, w] f32 of `storage` (or [b, h, w, c] of `dtype` when
  // channels_last), reallocating only when it is too small.
  void shape_images(int64_t b, int c, int h, int w, DType dtype = DType::kF32, bool channels_last = false);
};

}  // namespace sdp
