// Layer: a forward/backward pair (Caffe style, no autograd). The contract:
//
//  * The constructor registers parameters (and buffers) with the ParameterStore; values
//    exist only after the store is finalized, when init_parameters() fills them.
//  * configure(src_md, training) is called whenever the input shape or the mode changes;
//    it creates every oneDNN primitive and allocates outputs, so forward/backward create
//    nothing. It returns the descriptor (dims + layout) of the output.
//  * forward(src) takes memory with exactly src_md and returns the output (owned by the
//    layer, valid until the next forward). The layer may keep `src` for backward.
//  * backward(diff_dst) takes the output gradient in the output's layout, OVERWRITES the
//    gradients of this layer's parameters, reports each to the grad-ready hook in reverse
//    registration order, and returns the input gradient in src_md's layout (an empty
//    memory when needs_input_grad() is false, e.g. for the first layer of a model).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "nn/context.hpp"

namespace sdp::nn {

class Layer {
 public:
  Layer(Context& ctx, std::string name) : ctx_(ctx), name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }

  virtual memory::desc configure(const memory::desc& src_md, bool training) = 0;
  virtual const memory& forward(const memory& src) = 0;
  virtual const memory& backward(const memory& diff_dst) = 0;
  // Fills this layer's parameters and buffers; called in registration order with one
  // generator so equal seeds give bit-identical models on every rank.
  virtual void init_parameters(std::mt19937_64& /*rng*/) {}

  virtual bool has_parameters() const { return !params_.empty(); }
  bool needs_input_grad() const { return needs_input_grad_; }
  virtual void set_needs_input_grad(bool value) { needs_input_grad_ = value; }

 protected:
  Param& add_parameter(const std::string& suffix, const Shape& shape, bool weight_decay);
  Buffer& add_buffer(const std::string& suffix, const Shape& shape);
  // Reports this layer's own parameters to the hook, last registered first.
  void grads_ready() const;

  Context& ctx_;
  std::string name_;
  std::vector<Param*> params_;
  bool needs_input_grad_ = true;
  const memory empty_;
};

}  // namespace sdp::nn
