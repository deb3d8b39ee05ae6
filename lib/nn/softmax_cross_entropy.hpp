// SoftmaxCrossEntropy: the loss head. forward() returns the mean over the batch of
// -sum_j q_j log softmax(logits)_j and counts top-1 hits, where q is the target: one-hot,
// or with label smoothing e, (1 - e) one-hot + e / K (Szegedy et al. 2016); backward()
// returns d(loss)/d(logits) = (softmax - q) / N in the logits' layout. Labels are host memory.
#pragma once

#include <cstdint>
#include <memory>

#include "nn/context.hpp"

namespace sdp::nn {

class SoftmaxCrossEntropy {
 public:
  static std::unique_ptr<SoftmaxCrossEntropy> create(Context& ctx);
  virtual ~SoftmaxCrossEntropy() = default;

  virtual void configure(const TensorDesc& logits, int num_classes) = 0;
  // `hits`, when given (host memory, one per row): 1 where the row's top-1 class is its label,
  // else 0 (what per-class accuracy counts).
  virtual float forward(const TensorRef& logits, const int32_t* labels, int64_t* correct,
                        uint8_t* hits = nullptr) = 0;
  virtual const TensorRef& backward() = 0;
  // A training forward whose mean loss is taken later (take_loss): a GPU queues it and copies
  // the loss back without the host waiting (train.loss_read: step_end); the CPU computes it
  // at once. A later forward_deferred replaces a loss not yet taken.
  virtual void forward_deferred(const TensorRef& logits, const int32_t* labels) {
    deferred_loss_ = forward(logits, labels, nullptr);
  }
  // The last forward_deferred's mean loss, waiting for it where it is not known yet.
  virtual float take_loss() { return deferred_loss_; }
  // forward_deferred in its three parts, for a step recorded as a CUDA graph (Model's step
  // graphs), whose recording holds only the middle one: the labels checked and copied in, the
  // loss's kernels (whose gradient backward returns), the totals' copy back for take_loss.
  // Only the GPU's loss has them (std::logic_error).
  virtual void stage_labels(const int32_t* labels);
  virtual void queue_loss(const TensorRef& logits);
  virtual void queue_loss_read();

  // The last forward's sum of the rows' losses in device memory, and the rows: the mean loss is
  // their quotient. For an update decided on the device (optimizer.capturable); null on the CPU.
  virtual const double* loss_sum_on_device() const { return nullptr; }
  virtual int64_t rows() const { return 0; }

  // e in [0, 1); 0 (the default) is plain cross-entropy.
  void set_label_smoothing(float e) { label_smoothing_ = e; }
  float label_smoothing() const { return label_smoothing_; }
  // The logits' gradient is multiplied by `scale` (mixed precision's loss scaling: a power of
  // two, so the scaling itself is exact); the loss forward returns is not. 1 by default.
  void set_loss_scale(float scale) { loss_scale_ = scale; }
  float loss_scale() const { return loss_scale_; }

 protected:
  float label_smoothing_ = 0.0f;
  float loss_scale_ = 1.0f;
  float deferred_loss_ = 0.0f;
};

}  // namespace sdp::nn
