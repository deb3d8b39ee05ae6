#include "models/registry.hpp"

#include <array>
#include <stdexcept>
#include <string_view>

#include "config/model_names.hpp"
#include "core/error.hpp"
#include "models/builders.hpp"

namespace sdp::models {

namespace {

struct Entry {
  std::string_view name;
  std::unique_ptr<nn::Model> (*build)(const ModelOptions&);
};

// A constexpr table, so that the check below against the job spec's list runs at compile time.
constexpr std::array<Entry, 9> kRegistry = {{
    {"mlp", build_mlp},
    {"lenet5", build_lenet5},
    {"resnet20", [](const ModelOptions& o) { return build_resnet_cifar(o, 20); }},
    {"resnet32", [](const ModelOptions& o) { return build_resnet_cifar(o, 32); }},
    {"resnet44", [](const ModelOptions& o) { return build_resnet_cifar(o, 44); }},
    {"resnet56", [](const ModelOptions& o) { return build_resnet_cifar(o, 56); }},
    {"resnet18", [](const ModelOptions& o) { return build_resnet_imagenet(o, 18); }},
    {"resnet34", [](const ModelOptions& o) { return build_resnet_imagenet(o, 34); }},
    {"resnet50", [](const ModelOptions& o) { return build_resnet_imagenet(o, 50); }},
}};

constexpr bool registry_matches_job_spec() {
  if (kRegistry.size() != kModelNames.size()) return false;
  for (std::size_t i = 0; i < kRegistry.size(); ++i)
    if (kRegistry[i].name != kModelNames[i]) return false;
  return true;
}
// The job spec validates model.name against kModelNames (lib/config cannot link models/):
// a model added here must be added there, in the same order, and to docs/job-spec.md.
static_assert(registry_matches_job_spec(),
              "models/registry.cpp and lib/config/model_names.hpp must list the same models in the "
              "same order");

}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const Entry& entry : kRegistry) names.emplace_back(entry.name);
  return names;
}

std::unique_ptr<nn::Model> make_model(const ModelOptions& options) {
  if (options.num_classes < 1 || options.in_channels < 1 || options.height < 1 || options.width < 1)
    throw InputError("model " + options.name +
                     ": num_classes, in_channels, height and width must be positive");
  for (const Entry& entry : kRegistry) {
    if (entry.name != options.name) continue;
    try {
      return entry.build(options);
    } catch (const std::invalid_argument& e) {
      // The boundary where user options meet nn/'s contract checks: a layer that rejects its
      // input shape (too small for the architecture, bad widths) was given the user's data
      // shape or model options, so it is an input error here.
      throw InputError("model " + options.name + ": " + e.what());
    }
  }
  std::string known;
  for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError("unknown model '" + options.name + "' (known: " + known + ")");
}

}  // namespace sdp::models
