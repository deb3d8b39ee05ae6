#include "nn/add.hpp"

#include "nn/add_cpu.hpp"
#include "nn/add_cuda.hpp"
#include "nn/layer_factory.hpp"

namespace sdp::nn {

std::unique_ptr<Add> Add::create(Context& ctx) {
  return make_for_device<Add, AddCpu, AddCuda>(ctx, "Add");
}

}  // namespace sdp::nn
