// One pass of a convolution with a BatchNorm folded around it, as one operation graph of the
// cuDNN frontend (cuDNN's runtime fusion engines; NVIDIA's "NormConvolution" in its MLPerf
// ResNet-50), on NHWC activations in f16 or bf16:
//   forward:          y = conv(in, w), in = x, or relu(x * scale + bias) with the BatchNorm
//                     before it applied as the convolution loads its input (input_batchnorm);
//                     with `statistics`, each output channel's sum and sum of squares from its
//                     epilogue (genstats: the next BatchNorm's batch statistics)
//   input gradient:   dx = conv_dgrad(dy, w), or with add_to_input_grad conv_dgrad(dy, w) + dsum
//                     (a residual block's other input-gradient term, summed in the epilogue:
//                     model.grad_sum: fused); with input_batchnorm, through that BatchNorm's ReLU
//                     (its output recomputed from x, mean, inv_std, scale and bias, all f32 here),
//                     with its weight gradients and the coefficients of its input gradient
//                     (dbn_weight): drelu, dscale, dbias, eq_scale_dy, eq_scale_x, eq_bias
//   filter gradient:  dw = conv_wgrad(dy, in), `in` recomputed as it loads (input_batchnorm)
// and, not a convolution's pass, the backward of a residual branch's last BatchNorm folded with
// the block's sum and ReLU (its statistics from the convolution before, the sum and ReLU applied
// by our kernel, batchnorm_fold_cuda.hpp; cuDNN's fused batchnorm backward, NVIDIA's "DBN add
// ReLU"), on the activations' shape n, c, h, w:
//   residual batchnorm backward: dz = dy * mask (the ReLU's bits: the sum's gradient, z's);
//                     dx, dscale, dbias = batchnorm_backward(dz, x, scale, mean, inv_std), f32
//                     scale (gamma), mean, inv_std and weight gradients
//   batchnorm backward: the same without the mask (dz is dy): a projection shortcut's
//                     BatchNorm folded into that pass, given z's gradient
// Tensors are named as above; scale and bias are in the io type in the forward and filter
// gradient (cuDNN 9.19 on an H100 built no forward with f32 ones), f32 in the input gradient.
// Filters are KRSC (OHWI), as Conv2dCuda's NHWC copy. Built once per shape at configure (the
// layer's cache), executed in the step on the handle's stream with a workspace the layer owns.
// Without the frontend's headers at build time (pip install nvidia-cudnn-frontend, which
// scripts/install-deps.sh does) no graph builds and error() says so.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/dtype.hpp"
#include "nn/context.hpp"

namespace sdp::nn::cuda {

struct FusedConvShape {
  int64_t n = 0, c = 0, h = 0, w = 0;  // the input's sizes
  int64_t k = 0, r = 0;                // filters, square kernel
  int64_t stride = 1, padding = 0;
  DType dtype = DType::kF16;  // the io type: f16 or bf16
  int64_t out_h() const { return (h + 2 * padding - r) / stride + 1; }
  int64_t out_w() const { return (w + 2 * padding - r) / stride + 1; }
  bool operator<(const FusedConvShape& o) const;
};

enum class FusedPass { kForward, kInputGradient, kFilterGradient, kResidualBatchNormBackward, kBatchNormBackward };

struct FusedConvOptions {
  bool input_batchnorm = false;  // the BatchNorm before the convolution is folded in (see above)
  bool statistics = false;       // forward: the output's per-channel sum and sum of squares
  bool add_to_input_grad = false;  // input gradient (without input_batchnorm): + dsum
  // Only engines without cuDNN's NONDETERMINISTIC note (train.deterministic: the same bits every
  // run); none left means not built.
  bool deterministic = true;
  bool operator<(const FusedConvOptions& o) const;
};

class FusedConvGraph {
 public:
  struct TensorInfo {
    std::size_t bytes = 0;
    DType dtype = DType::kF32;
    bool output = false;
    bool bit_mask = false;  // one bit an element (bytes rounded up); dtype does not apply
  };

  // Builds the pass's graph (validate, operation graph, heuristics' plans, support, plans);
  // never throws for what cuDNN refuses: error() says at which stage and why.
  FusedConvGraph(cudnnHandle_t handle, FusedPass pass, const FusedConvShape& shape, const FusedConvOptions& options);
  ~FusedConvGraph();
  FusedConvGraph(const FusedConvGraph&) = delete;
  FusedConvGraph& operator=(const FusedConvGraph&) = delete;

  // The graph defined and checked by the frontend alone (shapes, types, what each node infers),
  // with no handle and no GPU: "" or why not. What a CPU test can check of a pass.
  static std::string validation_error(FusedPass pass, const FusedConvShape& shape, const FusedConvOptions& options);

  bool built() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  std::size_t workspace_bytes() const { return workspace_bytes_; }
  // Every tensor the graph reads or writes, by name.
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  // Queues the pass on the handle's stream. `by_name` has an address for each of tensors();
  // `workspace` holds workspace_bytes(). Throws sdp::RuntimeError naming `what` if cuDNN fails.
  void execute(cudnnHandle_t handle, const std::unordered_map<std::string, void*>& by_name, void* workspace,
               const std::string& what) const;

  struct Impl;  // the frontend's graph and tensors (cudnn_fusion_cuda.cpp)

 private:
  void build(cudnnHandle_t handle, FusedPass pass, const FusedConvShape& shape, const FusedConvOptions& options);
  std::unique_ptr<Impl> impl_;
  std::map<std::string, TensorInfo> tensors_;
  std::size_t workspace_bytes_ = 0;
  std::string error_;
};

// The graph of (pass, shape, options) on ctx's stream's cuDNN handle, built once and shared by
// every layer on that stream that asks (ResNet-50's blocks repeat their shapes; a build may
// compile kernels); kept with the stream. Check built() on what it returns.
std::shared_ptr<const FusedConvGraph> fused_conv_graph(Context& ctx, FusedPass pass, const FusedConvShape& shape,
                                                       const FusedConvOptions& options);

// Whether this build has the frontend (false: every graph's error() says how to get it).
bool fused_conv_graphs_compiled();

}  // namespace sdp::nn::cuda
