#include "nn/softmax_cross_entropy_cpu.hpp"

#include <cmath>
#include <stdexcept>

#include "core/error.hpp"

namespace sdp::nn {

void SoftmaxCrossEntropyCpu::configure(const TensorDesc& logits, int num_classes) {
  const memory::desc logits_md = to_md(logits);
  const Dims d = logits_md.dims();
  if (d.size() != 2 || d[1] != num_classes)
    throw std::invalid_argument("SoftmaxCrossEntropy: expected [N, " + std::to_string(num_classes) +
                                "] logits");
  batch_ = d[0];
  num_classes_ = num_classes;
  const memory::desc plain = plain_md(d);
  to_plain_.configure(logits_md, plain);
  from_plain_.configure(plain, logits_md);
  diff_plain_ = memory(plain, cpu_engine());
  logits_port_.configure(logits);
  diff_.desc = logits;
}

float SoftmaxCrossEntropyCpu::forward(const TensorRef& logits, const int32_t* labels, int64_t* correct) {
  const float* z = static_cast<const float*>(
      to_plain_.convert(onednn_stream(ctx_), logits_port_.bind(logits)).get_data_handle());
  float* dz = static_cast<float*>(diff_plain_.get_data_handle());
  const int k = num_classes_;
  const float inv_n = 1.0f / static_cast<float>(batch_);
  // Target weights: off the label e / K, on it 1 - e + e / K.
  const float off = label_smoothing_ / static_cast<float>(k);
  const float on = 1.0f - label_smoothing_ + off;
  double loss = 0.0;
  int64_t hits = 0;
  for (int64_t i = 0; i < batch_; ++i) {
    const int32_t label = labels[i];
    if (label < 0 || label >= k)
      throw InputError("label " + std::to_string(label) + " outside [0, " + std::to_string(k) +
                       ") at batch index " + std::to_string(i));
    const float* row = z + i * k;
    float* grad = dz + i * k;
    int argmax = 0;
    for (int j = 1; j < k; ++j)
      if (row[j] > row[argmax]) argmax = j;
    // Shift by the max so exp() cannot overflow.
    const float max = row[argmax];
    double sum = 0.0;
    for (int j = 0; j < k; ++j) {
      grad[j] = std::exp(row[j] - max);
      sum += grad[j];
    }
    // -sum_j q_j (z_j - max - log sum) with sum_j q_j = 1.
    double target_dot = static_cast<double>(row[label] - max);
    if (off > 0.0f) {
      double all = 0.0;
      for (int j = 0; j < k; ++j) all += static_cast<double>(row[j] - max);
      target_dot = double{on - off} * target_dot + double{off} * all;
    }
    loss += std::log(sum) - target_dot;
    const float scale = static_cast<float>(1.0 / sum) * inv_n;
    for (int j = 0; j < k; ++j) grad[j] = grad[j] * scale - off * inv_n;
    grad[label] -= (on - off) * inv_n;
    hits += argmax == label;
  }
  if (correct) *correct = hits;
  return static_cast<float>(loss / static_cast<double>(batch_));
}

const TensorRef& SoftmaxCrossEntropyCpu::backward() {
  diff_.data = from_plain_.convert(onednn_stream(ctx_), diff_plain_).get_data_handle();
  return diff_;
}

}  // namespace sdp::nn
