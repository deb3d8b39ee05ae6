#include "nn/flatten.hpp"

#include <functional>
#include <stdexcept>

#include "nn/flatten_cpu.hpp"
#include "nn/flatten_cuda.hpp"
#include "nn/layer_factory.hpp"

namespace sdp::nn {

std::unique_ptr<Flatten> Flatten::create(Context& ctx, std::string name) {
  return make_for_device<Flatten, FlattenCpu, FlattenCuda>(ctx, "Flatten", std::move(name));
}

}  // namespace sdp::nn
