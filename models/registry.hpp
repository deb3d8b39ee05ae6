// Model registry: every network the runner can train, built by name from ModelOptions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/model.hpp"

namespace sdp::models {

struct ModelOptions {
  std::string name;
  int num_classes = 10;
  int in_channels = 1, height = 28, width = 28;
  std::vector<int> hidden = {512, 512};  // mlp widths
  float dropout = 0.0f;                  // mlp: after each hidden ReLU
  bool zero_init_residual = false;       // resnets: each block's last BN gamma starts at 0
  uint64_t seed = 42;
  Device device = Device::cpu();  // where the layers compute and the arenas live
};

// Builds, finalizes and initializes the model. Unknown name or invalid options ->
// sdp::InputError (the message lists the known names).
std::unique_ptr<nn::Model> make_model(const ModelOptions& options);
// The registered names, in registration order: the same list as the job spec's
// config/model_names.hpp (checked at compile time in registry.cpp).
std::vector<std::string> model_names();

}  // namespace sdp::models
