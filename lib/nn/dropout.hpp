// Dropout with inverted scaling: in training each element is kept with probability 1 - p
// and scaled by 1 / (1 - p); inference is the identity. The masks come from a generator
// reseeded from (model seed, layer name, ctx.random_stream, ctx.random_step) whenever the
// position moves, so runs are reproducible and a resumed run draws the masks the
// uninterrupted one would have drawn (counter-based, like JAX's keys).
#pragma once

#include <memory>
#include <random>
#include <vector>

#include "nn/layer.hpp"

namespace sdp::nn {

class Dropout : public Layer {
 public:
  const char* kind() const override { return "dropout"; }
  bool same_work_every_step() const override { return false; }  // masks follow (stream, step)
  static std::unique_ptr<Dropout> create(Context& ctx, std::string name, float p);

  // Tests hold the mask fixed across forwards (finite differences need a fixed function).
  void set_fixed_mask(bool fixed) { fixed_mask_ = fixed; }

 protected:
  Dropout(Context& ctx, std::string name, float p);
  // Reseeds rng_ when the context's random position differs from the last one drawn at.
  void follow_random_position();
  // Fills mask_ for this forward (unless a fixed mask is ready) from the random position:
  // on the host for every device (std::mt19937_64 is sequential), so the CPU and the GPU
  // drop the same elements; the GPU copies the mask over. Returns whether it drew.
  bool draw_mask();

  float p_;
  bool training_ = false;
  bool fixed_mask_ = false;
  bool mask_ready_ = false;
  std::mt19937_64 rng_;
  uint64_t layer_seed_;
  uint64_t seeded_stream_ = 0;
  int64_t seeded_step_ = -1;
  std::vector<float> mask_;  // 0 or 1 / (1 - p), one per stored element (layout padding too)
};

}  // namespace sdp::nn
