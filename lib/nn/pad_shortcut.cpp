#include "nn/pad_shortcut.hpp"

#include <functional>
#include <stdexcept>

#include "nn/pad_shortcut_cpu.hpp"
#include "nn/pad_shortcut_cuda.hpp"
#include "nn/layer_factory.hpp"

namespace sdp::nn {

std::unique_ptr<PadShortcut> PadShortcut::create(Context& ctx, std::string name, int in_channels, int out_channels, int stride) {
  return make_for_device<PadShortcut, PadShortcutCpu, PadShortcutCuda>(ctx, "PadShortcut", std::move(name), in_channels, out_channels, stride);
}

PadShortcut::PadShortcut(Context& ctx, std::string name, int in_channels, int out_channels,
                         int stride)
    : Layer(ctx, std::move(name)),
      in_channels_(in_channels),
      out_channels_(out_channels),
      stride_(stride) {
  if (out_channels < in_channels || (out_channels - in_channels) % 2 != 0 || stride < 1)
    throw std::invalid_argument("PadShortcut " + name_ + ": invalid channels or stride");
}

}  // namespace sdp::nn
