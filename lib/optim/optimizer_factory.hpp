// Builds the optimizer the job spec names (optimizer.name).
#pragma once

#include <memory>

#include "config/choices.hpp"
#include "optim/optimizer.hpp"

namespace sdp {

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  float momentum = 0.9f;   // sgd, lars
  float dampening = 0.0f;  // sgd
  bool nesterov = false;   // sgd
  float beta1 = 0.9f;      // adam, adamw, lamb
  float beta2 = 0.999f;
  float eps = 1e-8f;  // adam, adamw, lamb, lars
  float weight_decay = 0.0f;
  bool decay_all = true;             // sgd, adam, adamw (lars and lamb follow Param::weight_decay)
  float trust_coefficient = 0.001f;  // lars
};

// Throws InputError for invalid values.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& spec, ParameterStore& store);

}  // namespace sdp
