// Builds the optimizer named in the job spec ("sgd" | "adam" | "adamw").
#pragma once

#include <memory>
#include <string>

#include "optim/optimizer.hpp"

namespace sdp {

struct OptimizerOptions {
  std::string name = "sgd";
  float momentum = 0.9f;  // sgd
  float dampening = 0.0f;
  bool nesterov = false;
  float beta1 = 0.9f;  // adam, adamw
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  bool decay_all = true;
};

// Throws InputError for an unknown name or invalid values.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& spec, ParameterStore& store);

}  // namespace sdp
