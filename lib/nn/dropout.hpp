// Dropout with inverted scaling: in training each element is kept with probability 1 - p
// and scaled by 1 / (1 - p); inference is the identity. The mask comes from a generator
// seeded from the model seed and the layer name, so runs are reproducible.
#pragma once

#include <memory>
#include <random>
#include <vector>

#include "nn/layer.hpp"

namespace sdp::nn {

class Dropout : public Layer {
 public:
  static std::unique_ptr<Dropout> create(Context& ctx, std::string name, float p);

  // Tests hold the mask fixed across forwards (finite differences need a fixed function).
  void set_fixed_mask(bool fixed) { fixed_mask_ = fixed; }

 protected:
  Dropout(Context& ctx, std::string name, float p);

  float p_;
  bool training_ = false;
  bool fixed_mask_ = false;
  bool mask_ready_ = false;
  std::mt19937_64 rng_;
  std::vector<float> mask_;  // 0 or 1 / (1 - p), one per stored element (layout padding too)
};

}  // namespace sdp::nn
