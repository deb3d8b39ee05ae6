// Builds the optimizer the job spec names (optimizer.name).
#pragma once

#include <memory>

#include "config/choices.hpp"
#include "optim/optimizer.hpp"

namespace sdp {

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  float momentum = 0.9f;  // sgd
  float dampening = 0.0f;
  bool nesterov = false;
  float beta1 = 0.9f;  // adam, adamw
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  bool decay_all = true;
};

// Throws InputError for invalid values.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& spec, ParameterStore& store);

}  // namespace sdp
