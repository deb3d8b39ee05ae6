// PadShortcut: the parameter-free "option A" shortcut of He et al. 2016 (CIFAR ResNets):
// subsample by `stride` (x[:, :, ::s, ::s]) and zero-pad the channels, (out - in) / 2 on
// each side as in the common PyTorch reference (akamaster/pytorch_resnet_cifar10).
#pragma once

#include <memory>

#include "nn/layer.hpp"

namespace sdp::nn {

class PadShortcut : public Layer {
 public:
  const char* kind() const override { return "shortcut"; }
  static std::unique_ptr<PadShortcut> create(Context& ctx, std::string name, int in_channels,
                                             int out_channels, int stride);

 protected:
  PadShortcut(Context& ctx, std::string name, int in_channels, int out_channels, int stride);

  int in_channels_, out_channels_, stride_;
};

}  // namespace sdp::nn
