#include "nn/softmax_cross_entropy_cpu.hpp"

#include <stdexcept>

#include "core/error.hpp"
#include "nn/softmax_xent_rule.hpp"

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

float SoftmaxCrossEntropyCpu::forward(const TensorRef& logits, const int32_t* labels, int64_t* correct,
                                      uint8_t* row_hits) {
  const float* z = static_cast<const float*>(
      to_plain_.convert(onednn_stream(ctx_), logits_port_.bind(logits)).get_data_handle());
  float* dz = static_cast<float*>(diff_plain_.get_data_handle());
  const int k = num_classes_;
  // The rule scales every gradient term by inv_n: the loss scale rides along.
  const float inv_n = 1.0f / static_cast<float>(batch_) * loss_scale_;
  const XentTarget q = xent_target(label_smoothing_, k);
  double loss = 0.0;
  int64_t hits = 0;
  for (int64_t i = 0; i < batch_; ++i) {
    const int32_t label = labels[i];
    if (label < 0 || label >= k)
      throw InputError("label " + std::to_string(label) + " outside [0, " + std::to_string(k) +
                       ") at batch index " + std::to_string(i));
    int argmax = 0;
    loss += softmax_xent_row(z + i * k, k, label, q, inv_n, dz + i * k, &argmax);
    hits += argmax == label;
    if (row_hits) row_hits[i] = argmax == label ? 1 : 0;
  }
  if (correct) *correct = hits;
  return static_cast<float>(loss / static_cast<double>(batch_));
}

const TensorRef& SoftmaxCrossEntropyCpu::backward() {
  diff_.data = from_plain_.convert(onednn_stream(ctx_), diff_plain_).get_data_handle();
  return diff_;
}

}  // namespace sdp::nn
