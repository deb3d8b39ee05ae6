#include "nn/add.hpp"

#include <stdexcept>

#include "nn/add_cpu.hpp"
#include "nn/add_cuda.hpp"
#include "nn/layer_factory.hpp"

namespace sdp::nn {

std::unique_ptr<Add> Add::create(Context& ctx) {
  return make_for_device<Add, AddCpu, AddCuda>(ctx, "Add");
}

const TensorRef& Add::forward_gated(const TensorRef&, const TensorRef&, const TensorRef&) {
  throw std::logic_error("Add: this device has no gated gradient sum (gates_by_relu_output)");
}

}  // namespace sdp::nn
