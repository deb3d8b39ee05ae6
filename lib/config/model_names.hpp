// The model names a job spec accepts (model.name). Header-only so that models/registry.cpp,
// which registers a builder for each, can check against it at compile time (a static_assert
// there) without lib/config linking models/ or models/ linking lib/config.
#pragma once

#include <array>
#include <string_view>

namespace sdp {

inline constexpr std::array<std::string_view, 9> kModelNames = {"mlp",      "lenet5",   "resnet20",
                                                                "resnet32", "resnet44", "resnet56",
                                                                "resnet18", "resnet34", "resnet50"};

// The CTR models on sparse features (lib/ctr, docs/ctr.md): trained by the CTR trainer, not
// the image pipeline.
inline constexpr std::array<std::string_view, 3> kCtrModelNames = {"deepfm", "fm", "lr"};

inline bool is_ctr_model(std::string_view name) {
  for (std::string_view n : kCtrModelNames)
    if (n == name) return true;
  return false;
}

}  // namespace sdp
