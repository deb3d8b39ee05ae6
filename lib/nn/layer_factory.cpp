#include "nn/layer_factory.hpp"

#include <string>

#include "core/error.hpp"

namespace sdp::nn {

void throw_no_implementation(const char* kind, const Device& device) {
  require_device(device, kind);  // names the missing CUDA backend when that is the reason
  throw InputError(std::string(kind) + " has no implementation for device " + device.str() +
                   " in this build of sdp-train");
}

}  // namespace sdp::nn
