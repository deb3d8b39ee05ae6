// The device switches of the context: which stream and which layout conversion a device gets.
#include "nn/context.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "nn/context_cuda.hpp"
#include "nn/layer_factory.hpp"
#include "nn/onednn.hpp"

namespace sdp::nn {

std::shared_ptr<Stream> make_compute_stream(const Device& device) {
  if (device.is_cpu()) return std::make_shared<OneDnnStream>();
#ifdef SDP_HAVE_CUDA
  if (device.is_cuda()) return sdp::make_stream(device);
#endif
  throw_no_implementation("Stream", device);
}

std::string Context::BatchNormFolding::summary() const {
  std::string line = std::to_string(folded) + " of " + std::to_string(folded + static_cast<int>(refused.size())) +
                     " BatchNorms between two convolutions folded into them";
  if (with_residual)
    line += ", " + std::to_string(folded_with_residual) + " of " +
            std::to_string(folded_with_residual + static_cast<int>(refused_with_residual.size())) +
            " with their block's sum after the one before";
  if (with_residual && (folded_shortcuts > 0 || !refused_shortcuts.empty()))
    line += ", " + std::to_string(folded_shortcuts) + " of " +
            std::to_string(folded_shortcuts + static_cast<int>(refused_shortcuts.size())) +
            " projection shortcuts' into theirs";
  line += " (cuDNN's graphs built in " + std::to_string(static_cast<long long>(std::llround(build_seconds * 1e3))) +
          " ms)";
  const std::string& first = !refused.empty()                 ? refused.front()
                             : !refused_with_residual.empty() ? refused_with_residual.front()
                             : !refused_shortcuts.empty()     ? refused_shortcuts.front()
                                                              : std::string();
  if (!first.empty()) line += "; the others run separately, the first because " + first;
  return line;
}

std::string Context::GradSumFusion::summary() const {
  std::string line = std::to_string(fused) + " of " + std::to_string(fused + static_cast<int>(refused.size())) +
                     " residual blocks' input gradient sums in their first convolution's pass";
  if (!refused.empty()) line += "; the others sum in a pass of their own, the first because " + refused.front();
  return line;
}

void release_shared_scratch(Context& ctx) {
#ifdef SDP_HAVE_CUDA
  if (ctx.device.is_cuda()) release_shared_scratch_cuda(ctx);
#else
  (void)ctx;
#endif
}

void convert_layout(Context& ctx, const TensorRef& src, const TensorRef& dst) {
  if (src.desc.shape != dst.desc.shape || src.desc.dtype != dst.desc.dtype)
    throw std::invalid_argument("convert_layout: " + src.desc.str() + " -> " + dst.desc.str());
  if (ctx.device.is_cpu()) return convert_layout_cpu(ctx, src, dst);
#ifdef SDP_HAVE_CUDA
  if (ctx.device.is_cuda()) return convert_layout_cuda(ctx, src, dst);
#endif
  throw_no_implementation("convert_layout", ctx.device);
}

void stage_channels_last(Context& ctx, const TensorRef& src, const TensorRef& dst) {
  if (src.desc.shape != dst.desc.shape || src.desc.shape.size() != 4 || src.desc.dtype != DType::kF32 ||
      src.desc.layout != Layout::kPlain || dst.desc.layout != Layout::kChannelsLast)
    throw std::invalid_argument("stage_channels_last: " + src.desc.str() + " -> " + dst.desc.str());
#ifdef SDP_HAVE_CUDA
  if (ctx.device.is_cuda()) return stage_channels_last_cuda(ctx, src, dst);
#endif
  throw_no_implementation("stage_channels_last", ctx.device);
}

}  // namespace sdp::nn
