#include "models/registry.hpp"

#include <functional>
#include <utility>

#include "core/error.hpp"
#include "models/builders.hpp"

namespace sdp::models {

namespace {
using Builder = std::function<std::unique_ptr<nn::Model>(const ModelOptions&)>;

const std::vector<std::pair<std::string, Builder>>& registry() {
  static const std::vector<std::pair<std::string, Builder>> entries = {
      {"mlp", build_mlp},
      {"lenet5", build_lenet5},
      {"resnet20", [](const ModelOptions& o) { return build_resnet_cifar(o, 20); }},
      {"resnet32", [](const ModelOptions& o) { return build_resnet_cifar(o, 32); }},
      {"resnet44", [](const ModelOptions& o) { return build_resnet_cifar(o, 44); }},
      {"resnet56", [](const ModelOptions& o) { return build_resnet_cifar(o, 56); }},
      {"resnet18", [](const ModelOptions& o) { return build_resnet_imagenet(o, 18); }},
      {"resnet34", [](const ModelOptions& o) { return build_resnet_imagenet(o, 34); }},
      {"resnet50", [](const ModelOptions& o) { return build_resnet_imagenet(o, 50); }},
  };
  return entries;
}
}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& entry : registry()) names.push_back(entry.first);
  return names;
}

std::unique_ptr<nn::Model> make_model(const ModelOptions& options) {
  if (options.num_classes < 1 || options.in_channels < 1 || options.height < 1 || options.width < 1)
    throw InputError("model " + options.name +
                     ": num_classes, in_channels, height and width must be positive");
  for (const auto& [name, build] : registry()) {
    if (name != options.name) continue;
    try {
      return build(options);
    } catch (const std::invalid_argument& e) {
      // The boundary where user options meet nn/'s contract checks: a layer that rejects its
      // input shape (too small for the architecture, bad widths) was given the user's data
      // shape or model options, so it is an input error here.
      throw InputError("model " + name + ": " + e.what());
    }
  }
  std::string known;
  for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError("unknown model '" + options.name + "' (known: " + known + ")");
}

}  // namespace sdp::models
