// SoftmaxCrossEntropyCuda: the loss head on the GPU through softmax_xent_cuda's kernels
// (softmax_xent_rule.hpp's rows, a deterministic one-block sum). Logits plain [N, K].
// Labels arrive in host memory: they are checked there (the CPU twin's InputError, same
// text) and copied to the device on the layer's stream. forward() returns the loss, so it
// reads the two totals back and waits for the stream. forward_deferred() copies them into
// page-locked host memory behind an event instead, and take_loss() waits for that event
// only: the host queues backward while forward runs.
#pragma once

#include <memory>

#include "core/stream.hpp"
#include "nn/context_cuda.hpp"
#include "nn/softmax_cross_entropy.hpp"

namespace sdp::nn {

class SoftmaxCrossEntropyCuda final : public SoftmaxCrossEntropy {
 public:
  explicit SoftmaxCrossEntropyCuda(Context& ctx) : ctx_(ctx) {}

  void configure(const TensorDesc& logits, int num_classes) override;
  float forward(const TensorRef& logits, const int32_t* labels, int64_t* correct, uint8_t* hits) override;
  const TensorRef& backward() override;
  void forward_deferred(const TensorRef& logits, const int32_t* labels) override;
  float take_loss() override;
  void stage_labels(const int32_t* labels) override;
  void queue_loss(const TensorRef& logits) override;
  void queue_loss_read() override;
  const double* loss_sum_on_device() const override { return totals_.as<const double>(); }
  int64_t rows() const override { return batch_; }

 private:
  Context& ctx_;
  int64_t batch_ = 0;
  int num_classes_ = 0;
  // grad_ is f32; with 16-bit logits (mixed precision) backward hands out grad_lp_, its cast.
  CudaBuffer labels_, grad_, grad_lp_, row_loss_, totals_, bad_label_;
  TensorRef diff_;
  std::shared_ptr<void> deferred_totals_;  // page-locked: the totals forward_deferred copies back
  std::unique_ptr<Event> deferred_ready_;  // recorded after that copy
};

}  // namespace sdp::nn
