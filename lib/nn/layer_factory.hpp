// How a layer kind picks its implementation from the context's device (Caffe's layer
// factory, without a global mode). Each kind X declares
//     static std::unique_ptr<X> create(Context& ctx, std::string name, const XOptions& o);
// and defines it in x.cpp as `return make_for_device<X, XCpu, XCudaTwin>(ctx, "X", name, o);`,
// where XCudaTwin is XCuda in a CUDA build and NoCudaTwin otherwise (or for a kind without one).
#pragma once

#include <memory>
#include <utility>

#include "nn/context.hpp"

namespace sdp::nn {

// Throws sdp::Error: `kind` has no implementation for `device` in this build.
[[noreturn]] void throw_no_implementation(const char* kind, const Device& device);

struct NoCudaTwin;

template <class Kind, class Cpu, class Cuda, class... Args>
std::unique_ptr<Kind> make_for_device(Context& ctx, const char* kind, Args&&... args) {
  if (ctx.device.is_cpu()) return std::make_unique<Cpu>(ctx, std::forward<Args>(args)...);
#ifdef SDP_HAVE_CUDA
  if constexpr (!std::is_same_v<Cuda, NoCudaTwin>) {
    if (ctx.device.is_cuda())
      return std::make_unique<Cuda>(ctx, std::forward<Args>(args)...);
  }
#endif
  throw_no_implementation(kind, ctx.device);
}

}  // namespace sdp::nn
