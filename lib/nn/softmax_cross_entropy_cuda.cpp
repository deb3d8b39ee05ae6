// SoftmaxCrossEntropyCuda (softmax_cross_entropy_cuda.hpp).
#include "nn/softmax_cross_entropy_cuda.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include "core/cuda_casts.hpp"
#include "core/device_memory.hpp"
#include "core/error.hpp"
#include "nn/cuda_util_cuda.hpp"
#include "nn/softmax_xent_cuda.hpp"

namespace sdp::nn {

void SoftmaxCrossEntropyCuda::configure(const TensorDesc& logits, int num_classes) {
  require_cuda_layout(logits, "SoftmaxCrossEntropy");
  if (logits.shape.size() != 2 || logits.shape[1] != num_classes)
    throw std::invalid_argument("SoftmaxCrossEntropy: expected [N, " + std::to_string(num_classes) + "] logits");
  batch_ = logits.shape[0];
  num_classes_ = num_classes;
  const Device& d = logits.device;
  labels_.reserve(d, static_cast<std::size_t>(batch_) * sizeof(int32_t));
  grad_.reserve(d, static_cast<std::size_t>(logits.numel()) * sizeof(float));
  if (logits.dtype != DType::kF32) grad_lp_.reserve(d, logits.nbytes());
  row_loss_.reserve(d, 2 * static_cast<std::size_t>(batch_) * sizeof(double));
  totals_.reserve(d, 2 * sizeof(double));
  bad_label_.reserve(d, sizeof(int));
  diff_ = {logits, logits.dtype == DType::kF32 ? grad_.get() : grad_lp_.get()};
  if (!deferred_totals_) {
    deferred_totals_ = allocate_pinned_host(2 * sizeof(double));
    deferred_ready_ = ctx_.stream->make_event();
  }
}

void SoftmaxCrossEntropyCuda::stage_labels(const int32_t* labels) {
  for (int64_t i = 0; i < batch_; ++i)
    if (labels[i] < 0 || labels[i] >= num_classes_)
      throw InputError("label " + std::to_string(labels[i]) + " outside [0, " + std::to_string(num_classes_) +
                       ") at batch index " + std::to_string(i));
  // Pageable host memory: the call returns once the labels are staged, so the caller may
  // reuse its batch buffer at once.
  cuda::check(cudaMemcpyAsync(labels_.get(), labels, static_cast<std::size_t>(batch_) * sizeof(int32_t),
                              cudaMemcpyHostToDevice, cuda::stream_of(ctx_)),
              "cudaMemcpyAsync");
}

// The loss kernels (and the 16-bit gradient) on the labels staged last.
void SoftmaxCrossEntropyCuda::queue_loss(const TensorRef& logits) {
  cuda_xent::forward(logits.desc.dtype, logits.data, labels_.as<const int32_t>(), batch_, num_classes_,
                     label_smoothing_, loss_scale_, grad_.as<float>(), row_loss_.as<double>(), totals_.as<double>(),
                     bad_label_.as<int>(), ctx_.stream.get());
  if (logits.desc.dtype != DType::kF32)
    cuda_casts::from_f32(logits.desc.dtype, grad_lp_.get(), grad_.as<const float>(), batch_ * num_classes_, 1.0f,
                         ctx_.stream.get());
}

float SoftmaxCrossEntropyCuda::forward(const TensorRef& logits, const int32_t* labels, int64_t* correct,
                                       uint8_t* hits) {
  stage_labels(labels);
  queue_loss(logits);
  cudaStream_t s = cuda::stream_of(ctx_);
  double totals[2] = {0.0, 0.0};
  cuda::check(cudaMemcpyAsync(totals, totals_.get(), sizeof(totals), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
  // The rows' hits (1.0 or 0.0) are the second half of row_loss (softmax_xent_cuda.hpp).
  std::vector<double> row_hits(hits != nullptr ? static_cast<std::size_t>(batch_) : 0);
  if (hits != nullptr)
    cuda::check(cudaMemcpyAsync(row_hits.data(), row_loss_.as<double>() + batch_, row_hits.size() * sizeof(double),
                                cudaMemcpyDeviceToHost, s),
                "cudaMemcpyAsync");
  cuda::check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  if (correct) *correct = static_cast<int64_t>(totals[1]);
  for (std::size_t i = 0; i < row_hits.size(); ++i) hits[i] = row_hits[i] != 0.0 ? 1 : 0;
  return static_cast<float>(totals[0] / static_cast<double>(batch_));
}

void SoftmaxCrossEntropyCuda::forward_deferred(const TensorRef& logits, const int32_t* labels) {
  stage_labels(labels);
  queue_loss(logits);
  queue_loss_read();
}

void SoftmaxCrossEntropyCuda::queue_loss_read() {
  cuda::check(cudaMemcpyAsync(deferred_totals_.get(), totals_.get(), 2 * sizeof(double), cudaMemcpyDeviceToHost,
                              cuda::stream_of(ctx_)),
              "cudaMemcpyAsync");
  deferred_ready_->record();
}

float SoftmaxCrossEntropyCuda::take_loss() {
  deferred_ready_->synchronize();
  return static_cast<float>(static_cast<const double*>(deferred_totals_.get())[0] / static_cast<double>(batch_));
}

const TensorRef& SoftmaxCrossEntropyCuda::backward() { return diff_; }

}  // namespace sdp::nn
