// PadShortcut: the parameter-free "option A" shortcut of He et al. 2016 (CIFAR ResNets):
// subsample by `stride` (x[:, :, ::s, ::s]) and zero-pad the channels, (out - in) / 2 on
// each side as in the common PyTorch reference (akamaster/pytorch_resnet_cifar10).
#pragma once

#include "nn/layer.hpp"

namespace sdp::nn {

class PadShortcut : public Layer {
 public:
  PadShortcut(Context& ctx, std::string name, int in_channels, int out_channels, int stride);

  memory::desc configure(const memory::desc& src_md, bool training) override;
  const memory& forward(const memory& src) override;
  const memory& backward(const memory& diff_dst) override;

 private:
  int in_channels_, out_channels_, stride_;
  Dims in_dims_, out_dims_;
  LayoutAdapter src_to_plain_, diff_to_src_;
  memory dst_, diff_src_plain_;
};

}  // namespace sdp::nn
