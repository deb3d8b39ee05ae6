#include "nn/pool2d.hpp"

#include <functional>
#include <stdexcept>

#include "nn/pool2d_cpu.hpp"
#include "nn/pool2d_cuda.hpp"
#include "nn/layer_factory.hpp"

namespace sdp::nn {

// The CUDA twin is on cuDNN: without cuDNN a CUDA build has none.
#ifdef SDP_HAVE_CUDNN
using Pool2dCudaTwin = Pool2dCuda;
#else
using Pool2dCudaTwin = NoCudaTwin;
#endif

std::unique_ptr<Pool2d> Pool2d::create(Context& ctx, std::string name, const Pool2dOptions& options) {
  return make_for_device<Pool2d, Pool2dCpu, Pool2dCudaTwin>(ctx, "Pool2d", std::move(name), options);
}

Pool2d::Pool2d(Context& ctx, std::string name, const Pool2dOptions& options)
    : Layer(ctx, std::move(name)), options_(options) {
  if (options_.fuse_relu && options_.kind != PoolKind::kMax)
    throw std::invalid_argument("Pool2d " + name_ + ": fuse_relu needs max pooling");
}

}  // namespace sdp::nn
