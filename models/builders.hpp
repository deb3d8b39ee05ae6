// The per-family builders behind the registry (internal to models/).
#pragma once

#include <memory>

#include "models/registry.hpp"

namespace sdp::models {

std::unique_ptr<nn::Model> build_mlp(const ModelOptions& options);
std::unique_ptr<nn::Model> build_lenet5(const ModelOptions& options);
// CIFAR ResNet-(6n+2) of He et al. 2016 §4.2, option A shortcuts.
std::unique_ptr<nn::Model> build_resnet_cifar(const ModelOptions& options, int depth);
// torchvision resnet18/34 (basic blocks) and resnet50 (bottlenecks).
std::unique_ptr<nn::Model> build_resnet_imagenet(const ModelOptions& options, int depth);

}  // namespace sdp::models
