#include "core/tensor_desc.hpp"

namespace sdp {

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::kPlain: return "plain";
    case Layout::kChannelsLast: return "channels_last";
    case Layout::kBackend: return "backend";
  }
  return "?";
}

std::size_t TensorDesc::nbytes() const {
  if (layout == Layout::kBackend && backend) return backend->nbytes();
  return static_cast<std::size_t>(numel()) * dtype_size(dtype);
}

bool TensorDesc::operator==(const TensorDesc& other) const {
  if (shape != other.shape || dtype != other.dtype || !(device == other.device) ||
      layout != other.layout)
    return false;
  if (layout != Layout::kBackend) return true;
  return backend && other.backend && backend->same_as(*other.backend);
}

std::string TensorDesc::str() const {
  std::string s = shape_str(shape) + " " + dtype_name(dtype) + " " + device.str() + " ";
  return s + (layout == Layout::kBackend && backend ? backend->str() : layout_name(layout));
}

}  // namespace sdp
