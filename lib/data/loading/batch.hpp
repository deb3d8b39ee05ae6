// Batch: one rank's share of a step, ready for the model.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.hpp"
#include "data/loading/sampler.hpp"

namespace sdp {

struct Batch {
  Tensor images;                 // [B, C, H, W] f32, normalized (view of `storage`)
  std::vector<int32_t> labels;   // B
  std::vector<int64_t> indices;  // B dataset indices, in batch order
  int64_t step = 0;              // 0-based position in the current iteration
  int micro = 0;                 // training: micro-batch of its step (train.accumulate_steps)
  SampleCursor cursor;           // training: where this step's global batch starts
  SampleCursor next_cursor;      // training: checkpoint this after the step succeeded
  Tensor storage;                // reused across batches; grows, never shrinks
  bool pinned = false;           // storage in page-locked memory (a GPU model copies it in async)

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  // Points `images` at [b, c, h, w] of `storage`, reallocating only when it is too small.
  void shape_images(int64_t b, int c, int h, int w);
};

}  // namespace sdp
