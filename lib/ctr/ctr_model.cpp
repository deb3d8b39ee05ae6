#include "ctr/ctr_model.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "core/error.hpp"
#include "ctr/counter_random.hpp"
#include "ctr/ctr_kernels.hpp"
#include "nn/cpu_gemm.hpp"

namespace sdp {

namespace {

using ctr_random::uniform01;

uint64_t key(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) { return ctr_random::chain(a, b, c, d); }

// A standard normal cut at two deviations (TensorFlow's truncated_normal), from a key alone.
double truncated_normal(uint64_t k) {
  for (uint64_t attempt = 0;; ++attempt) {
    const double u1 = uniform01(key(k, attempt, 1)), u2 = uniform01(key(k, attempt, 2));
    const double z = std::sqrt(-2.0 * std::log(u1 + 1e-300)) * std::cos(6.283185307179586 * u2);
    if (std::fabs(z) <= 2.0) return z;
  }
}

// [0, n) in chunks, one per thread, of at least `grain` items each: the loops below are
// per-sample or per-pair.
template <typename Body>
void parallel_chunks(int64_t n, Body&& body, int64_t grain = 256) {
  const int threads = std::max(1, std::min<int>(omp_get_max_threads(), static_cast<int>((n + grain - 1) / grain)));
  if (threads == 1) {
    body(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t begin = n * t / nt, end = n * (t + 1) / nt;
    body(begin, end);
  }
}

// Columns [0, n) in blocks of 16, one range per thread (column sums keep their row order).
template <typename Body>
void parallel_columns(int64_t n, Body&& body) {
  const int64_t blocks = (n + 15) / 16;
  const int threads = std::max(1, std::min<int>(omp_get_max_threads(), static_cast<int>(blocks)));
  if (threads == 1) {
    body(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t begin = std::min(n, blocks * t / nt * 16), end = std::min(n, blocks * (t + 1) / nt * 16);
    body(begin, end);
  }
}

}  // namespace

CtrModelKind ctr_model_kind(const std::string& name) {
  if (name == "deepfm") return CtrModelKind::kDeepFm;
  if (name == "fm") return CtrModelKind::kFm;
  if (name == "lr") return CtrModelKind::kLr;
  throw std::invalid_argument("not a CTR model: " + name);
}

CtrModel::CtrModel(const CtrModelShape& shape, uint64_t seed, TableShard shard)
    : shape_(shape), seed_(seed), shard_(shard) {
  if (shape_.kind != CtrModelKind::kDeepFm) shape_.hidden.clear();
  const int width = shape_.width(), k = shape_.k();
  const int64_t rows = shard_.rows(shape_.rows);
  table_.resize(static_cast<size_t>(rows) * width);
  // Glorot normal as the sample's tf.glorot_normal_initializer: w is [rows] (fans rows, rows),
  // v is [rows, K]; TensorFlow's truncated normal has its deviation divided by 0.8796.
  const double w_std = std::sqrt(1.0 / static_cast<double>(shape_.rows)) / 0.87962566103423978;
  const double v_std = std::sqrt(2.0 / static_cast<double>(shape_.rows + k)) / 0.87962566103423978;
  float* table = table_.data();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const auto id = static_cast<uint64_t>(shard_.global_id(r));
    table[r * width] = static_cast<float>(w_std * truncated_normal(key(seed, 1, id, 0)));
    for (int j = 1; j < width; ++j)
      table[r * width + j] = static_cast<float>(v_std * truncated_normal(key(seed, 2, id, j)));
  }

  auto add_segment = [&](const std::string& name, std::vector<int64_t> dims, bool decays) {
    int64_t size = 1;
    for (int64_t d : dims) size *= d;
    segments_.push_back({name, std::move(dims), static_cast<int64_t>(dense_.size()), size, decays});
    dense_.resize(dense_.size() + static_cast<size_t>(size), 0.0f);
    return segments_.back().offset;
  };
  bias_offset_ = add_segment("bias", {1}, false);
  int64_t in = static_cast<int64_t>(shape_.fields) * k;
  const auto glorot_uniform = [&](int64_t offset, int64_t out_dim, int64_t in_dim, uint64_t layer) {
    const double limit = std::sqrt(6.0 / static_cast<double>(in_dim + out_dim));
    for (int64_t i = 0; i < out_dim * in_dim; ++i)
      dense_[offset + i] = static_cast<float>(limit * (2.0 * uniform01(key(seed, 3, layer, i)) - 1.0));
  };
  for (size_t i = 0; i < shape_.hidden.size(); ++i) {
    const int64_t out = shape_.hidden[i];
    const std::string name = "mlp." + std::to_string(i);
    weight_offsets_.push_back(add_segment(name + ".weight", {out, in}, true));
    bias_offsets_.push_back(add_segment(name + ".bias", {out}, false));
    glorot_uniform(weight_offsets_.back(), out, in, i);
    if (shape_.batch_norm) {
      // gamma then beta, adjacent: PyTorch's BatchNorm1d weight and bias.
      bn_offsets_.push_back(add_segment(name + ".bn.weight", {out}, false));
      add_segment(name + ".bn.bias", {out}, false);
      for (int64_t j = 0; j < out; ++j) dense_[bn_offsets_.back() + j] = 1.0f;
      running_mean_.emplace_back(out, 0.0f);
      running_var_.emplace_back(out, 1.0f);
    }
    in = out;
  }
  if (shape_.kind == CtrModelKind::kDeepFm) {
    weight_offsets_.push_back(add_segment("output.weight", {1, in}, true));
    bias_offsets_.push_back(add_segment("output.bias", {1}, false));
    glorot_uniform(weight_offsets_.back(), 1, in, shape_.hidden.size());
  }
}

int64_t CtrModel::mlp_flops_per_sample() const {
  int64_t flops = 0;
  for (const DenseSegment& s : segments_)
    if (s.shape.size() == 2) flops += 2 * s.size;
  return flops;
}

double CtrModel::forward(const CtrBatch& batch, bool training, int64_t step, float* prob) {
  const CtrKernels& kernels = ctr_kernels();
  const int64_t b = batch.size;
  const int fields = shape_.fields, k = shape_.k(), width = shape_.width();
  const int64_t pairs = b * fields;
  first_.resize(static_cast<size_t>(pairs));
  deep_.resize(static_cast<size_t>(pairs * k));
  sums_.resize(static_cast<size_t>(b * k));
  logit_.resize(static_cast<size_t>(b));
  // A sample's rows gathered, then its FM term while they are in the cache.
  parallel_chunks(
      b,
      [&](int64_t begin, int64_t end) {
        kernels.gather_scaled(lookup_ != nullptr ? lookup_ : table_.data(), width, batch.ids, batch.values, begin * fields, end * fields,
                              first_.data(), deep_.data());
        kernels.fm_forward(first_.data(), deep_.data(), fields, shape_.kind == CtrModelKind::kLr ? 0 : k, begin, end,
                           sums_.data(), logit_.data());
      },
      std::max<int64_t>(1, 256 / fields));
  const float bias = dense_[bias_offset_];
  for (int64_t i = 0; i < b; ++i) logit_[i] += bias;
  if (shape_.kind == CtrModelKind::kDeepFm) mlp_forward(b, training, step, batch.samples);
  if (batch.labels == nullptr) {
    for (int64_t i = 0; i < b; ++i) {
      const float z = logit_[i];
      prob[i] = z >= 0 ? 1.0f / (1.0f + std::exp(-z)) : std::exp(z) / (1.0f + std::exp(z));
    }
    return 0.0;
  }
  return kernels.sigmoid_log_loss(logit_.data(), batch.labels, 0, b, 1.0f, prob, nullptr);
}

void CtrModel::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                    const float* b, int64_t ldb, float* c, int64_t ldc) {
  const auto start = std::chrono::steady_clock::now();
  nn::cpu_sgemm(trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  gemm_tally_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  gemm_tally_.flops += 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
}

void CtrModel::mlp_forward(int64_t batch, bool training, int64_t step, const int64_t* samples) {
  const CtrKernels& kernels = ctr_kernels();
  const size_t layers = shape_.hidden.size();
  acts_.resize(layers);
  masks_.resize(layers);
  const float drop = training ? shape_.dropout : 0.0f;
  const float keep_scale = drop > 0 ? 1.0f / (1.0f - drop) : 1.0f;
  const float* in = deep_.data();
  int64_t in_dim = static_cast<int64_t>(shape_.fields) * shape_.k();
  for (size_t l = 0; l < layers; ++l) {
    const int64_t out_dim = shape_.hidden[l];
    std::vector<float>& out = acts_[l];
    std::vector<float>& mask = masks_[l];
    out.resize(static_cast<size_t>(batch * out_dim));
    mask.resize(out.size());
    const float* w = dense_.data() + weight_offsets_[l];
    const float* bias = dense_.data() + bias_offsets_[l];
    gemm(false, true, batch, out_dim, in_dim, in, in_dim, w, in_dim, out.data(), out_dim);
    // A unit is dropped when its 32 random bits fall below drop * 2^32. The bits follow (seed,
    // step, sample, layer, unit): the same masks on any number of ranks.
    const uint32_t drop_below =
        static_cast<uint32_t>(std::min(static_cast<double>(drop) * 4294967296.0, 4294967295.0));
    row_keys_.resize(static_cast<size_t>(batch));
    if (shape_.batch_norm) batch_norm_forward(l, batch, out_dim, training, out.data(), bias);
    // Dropout after the BatchNorm (no bias or ReLU there); m is then the dropout factor alone.
    const float* epilogue_bias = shape_.batch_norm ? nullptr : bias;
    parallel_chunks(batch, [&](int64_t begin, int64_t end) {
      if (drop_below > 0)
        for (int64_t i = begin; i < end; ++i)
          row_keys_[i] = key(seed_ ^ 0x64726f70ULL, static_cast<uint64_t>(step),
                             static_cast<uint64_t>(samples ? samples[i] : i), l);
      kernels.bias_relu_dropout(out.data(), epilogue_bias, row_keys_.data(), out_dim, begin, end, drop_below,
                                keep_scale, mask.data());
    });
    in = out.data();
    in_dim = out_dim;
  }
  // The output unit: y_d = a . w_out + b_out, added to the logit.
  const float* w = dense_.data() + weight_offsets_[layers];
  const float bias = dense_[bias_offsets_[layers]];
  parallel_chunks(batch, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float y = 0.0f;
      const float* a = in + i * in_dim;
      for (int64_t j = 0; j < in_dim; ++j) y += a[j] * w[j];
      logit_[i] += y + bias;
    }
  });
}

void CtrModel::backward(const CtrBatch& batch, float scale, std::vector<float>& dense_grad,
                        RowAccumulator& table_grad) {
  const CtrKernels& kernels = ctr_kernels();
  const int64_t b = batch.size;
  const int fields = shape_.fields, k = shape_.k();
  dense_grad.resize(dense_.size());  // every element is written below
  dlogit_.resize(static_cast<size_t>(b));
  prob_.resize(static_cast<size_t>(b));
  kernels.sigmoid_log_loss(logit_.data(), batch.labels, 0, b, scale, prob_.data(), dlogit_.data());
  double bias_grad = 0.0;
  for (int64_t i = 0; i < b; ++i) bias_grad += dlogit_[i];
  dense_grad[bias_offset_] = static_cast<float>(bias_grad);
  const float* ddeep = nullptr;
  if (shape_.kind == CtrModelKind::kDeepFm) {
    mlp_backward(b, dlogit_.data(), dense_grad);
    ddeep = ddeep_.data();
  }
  // Each pair's table gradient is made where its id's row is summed (no per-pair buffer), in
  // pair order. More threads: each takes a range of the slots holding about as many pairs, and
  // passes over all pairs for its own. Same sums, same bits, on any number of threads.
  const int kk = shape_.kind == CtrModelKind::kLr ? 0 : k;
  const int64_t pairs = b * fields;
  const uint32_t* slots = table_grad.assign_slots(batch.ids, pairs);
  const int64_t slot_count = table_grad.rows().size();
  const int threads = std::max(1, std::min<int>(omp_get_max_threads(), static_cast<int>((pairs + 1023) / 1024)));
  slot_bounds_.assign(1, 0);
  if (threads > 1) {
    pairs_per_slot_.assign(static_cast<size_t>(slot_count), 0);
    for (int64_t p = 0; p < pairs; ++p) ++pairs_per_slot_[slots[p] & ~RowAccumulator::kNewSlot];
    int64_t seen = 0;
    for (int64_t s = 0; s < slot_count && static_cast<int>(slot_bounds_.size()) < threads; ++s) {
      seen += pairs_per_slot_[s];
      if (seen * threads >= pairs * static_cast<int64_t>(slot_bounds_.size())) slot_bounds_.push_back(static_cast<uint32_t>(s + 1));
    }
  }
  slot_bounds_.resize(static_cast<size_t>(threads) + 1, static_cast<uint32_t>(slot_count));
  float* rows = table_grad.row(0);
  const auto slot_range = [&](int r) {
    kernels.add_pair_gradients(deep_.data(), sums_.data(), dlogit_.data(), ddeep, batch.values, fields, kk, slots, 0,
                               pairs, slot_bounds_[r], slot_bounds_[r + 1], rows);
  };
  if (threads == 1) {
    slot_range(0);
    return;
  }
#pragma omp parallel num_threads(threads)
  for (int r = omp_get_thread_num(); r < threads; r += omp_get_num_threads()) slot_range(r);
}

void CtrModel::mlp_backward(int64_t batch, const float* dout, std::vector<float>& dense_grad) {
  const CtrKernels& kernels = ctr_kernels();
  const size_t layers = shape_.hidden.size();
  const int64_t deep_dim = static_cast<int64_t>(shape_.fields) * shape_.k();
  // The output unit.
  int64_t in_dim = shape_.hidden[layers - 1];
  const float* a_last = acts_[layers - 1].data();
  {
    float* gw = dense_grad.data() + weight_offsets_[layers];
    gemm(true, false, 1, in_dim, batch, dout, 1, a_last, in_dim, gw, in_dim);
    double gb = 0.0;
    for (int64_t i = 0; i < batch; ++i) gb += dout[i];
    dense_grad[bias_offsets_[layers]] = static_cast<float>(gb);
    const float* w = dense_.data() + weight_offsets_[layers];
    dacts_a_.resize(static_cast<size_t>(batch * in_dim));
    float* da = dacts_a_.data();
    parallel_chunks(batch, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        for (int64_t j = 0; j < in_dim; ++j) da[i * in_dim + j] = dout[i] * w[j];
    });
  }
  for (size_t l = layers; l-- > 0;) {
    const int64_t out_dim = shape_.hidden[l];
    const int64_t layer_in = l == 0 ? deep_dim : shape_.hidden[l - 1];
    const float* input = l == 0 ? deep_.data() : acts_[l - 1].data();
    // dZ = dA * (ReLU and dropout's factor), in place (with BatchNorm between them: dropout,
    // BatchNorm's backward, then ReLU).
    // The bias's gradient is dZ's column sums; columns split over the threads.
    float* dz = dacts_a_.data();
    const float* m = masks_[l].data();
    float* gb = dense_grad.data() + bias_offsets_[l];
    const auto by_columns = [&](const float* mask, float* sums) {
      parallel_columns(out_dim, [&](int64_t begin, int64_t end) {
        kernels.mask_column_sums(dz, mask, batch, out_dim, begin, end, sums);
      });
    };
    if (shape_.batch_norm) {
      by_columns(m, nullptr);
      batch_norm_backward(l, batch, out_dim, dz, dense_grad);
      by_columns(nullptr, gb);
    } else {
      by_columns(m, gb);
    }
    float* gw = dense_grad.data() + weight_offsets_[l];
    gemm(true, false, out_dim, layer_in, batch, dz, out_dim, input, layer_in, gw, layer_in);
    std::vector<float>& din = l == 0 ? ddeep_ : dacts_b_;
    din.resize(static_cast<size_t>(batch * layer_in));
    gemm(false, false, batch, layer_in, out_dim, dz, out_dim, dense_.data() + weight_offsets_[l], layer_in, din.data(),
         layer_in);
    if (l > 0) std::swap(dacts_a_, dacts_b_);
  }
}

void CtrModel::batch_norm_forward(size_t l, int64_t batch, int64_t width, bool training, float* o, const float* bias) {
  constexpr float kEps = 1e-3f;  // tf.contrib.layers.batch_norm's epsilon
  relu_out_.resize(shape_.hidden.size());
  normalized_.resize(shape_.hidden.size());
  inv_std_.resize(shape_.hidden.size());
  std::vector<float>& a = relu_out_[l];
  std::vector<float>& xhat = normalized_[l];
  std::vector<float>& inv = inv_std_[l];
  a.resize(static_cast<size_t>(batch * width));
  xhat.resize(a.size());
  inv.resize(static_cast<size_t>(width));
  for (int64_t i = 0; i < batch * width; ++i) a[i] = std::max(0.0f, o[i] + bias[i % width]);
  const float* gamma = dense_.data() + bn_offsets_[l];
  const float* beta = gamma + width;
  std::vector<float> mean(static_cast<size_t>(width)), var(static_cast<size_t>(width));
  if (training) {
    // Per feature over the batch, in double, sample order: the same bits on every ISA.
    for (int64_t j = 0; j < width; ++j) {
      double sum = 0, squares = 0;
      for (int64_t i = 0; i < batch; ++i) sum += a[i * width + j];
      const double mu = sum / static_cast<double>(batch);
      for (int64_t i = 0; i < batch; ++i) squares += (a[i * width + j] - mu) * (a[i * width + j] - mu);
      mean[j] = static_cast<float>(mu);
      var[j] = static_cast<float>(squares / static_cast<double>(batch));
    }
    if (l == 0) batch_stats_.clear();
    batch_stats_.insert(batch_stats_.end(), mean.begin(), mean.end());
    batch_stats_.insert(batch_stats_.end(), var.begin(), var.end());
  } else {
    mean = running_mean_[l];
    var = running_var_[l];
  }
  for (int64_t j = 0; j < width; ++j) inv[j] = 1.0f / std::sqrt(var[j] + kEps);
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t j = 0; j < width; ++j) {
      const float x = (a[i * width + j] - mean[j]) * inv[j];
      xhat[i * width + j] = x;
      o[i * width + j] = gamma[j] * x + beta[j];
    }
}

void CtrModel::batch_norm_backward(size_t l, int64_t batch, int64_t width, float* d, std::vector<float>& dense_grad) {
  // d: the gradient at BatchNorm's output, replaced by the one at the Linear's output (through
  // BatchNorm with batch statistics, then ReLU).
  const float* gamma = dense_.data() + bn_offsets_[l];
  float* dgamma = dense_grad.data() + bn_offsets_[l];
  float* dbeta = dgamma + width;
  const std::vector<float>& xhat = normalized_[l];
  const std::vector<float>& inv = inv_std_[l];
  const std::vector<float>& a = relu_out_[l];
  const float n = static_cast<float>(batch);
  for (int64_t j = 0; j < width; ++j) {
    double sum_d = 0, sum_dx = 0;
    for (int64_t i = 0; i < batch; ++i) {
      sum_d += d[i * width + j];
      sum_dx += d[i * width + j] * xhat[i * width + j];
    }
    dgamma[j] = static_cast<float>(sum_dx);
    dbeta[j] = static_cast<float>(sum_d);
    const float scale = gamma[j] * inv[j] / n;
    for (int64_t i = 0; i < batch; ++i) {
      const int64_t at = i * width + j;
      const float da = scale * (n * d[at] - static_cast<float>(sum_d) - xhat[at] * static_cast<float>(sum_dx));
      d[at] = a[at] > 0.0f ? da : 0.0f;
    }
  }
}

void CtrModel::update_running_stats(const float* averaged) {
  const float decay = shape_.batch_norm_decay;
  for (size_t l = 0; l < running_mean_.size(); ++l) {
    const size_t width = running_mean_[l].size();
    for (size_t j = 0; j < width; ++j) {
      running_mean_[l][j] = decay * running_mean_[l][j] + (1.0f - decay) * averaged[j];
      running_var_[l][j] = decay * running_var_[l][j] + (1.0f - decay) * averaged[width + j];
    }
    averaged += 2 * width;
  }
}

std::vector<NamedTensor> CtrModel::named_tensors(bool table) const {
  std::vector<NamedTensor> out;
  const auto host = [](std::vector<int64_t> dims) { return Tensor(Shape(std::move(dims)), DType::kF32, Device::cpu()); };
  const int width = shape_.width(), k = shape_.k();
  const int64_t rows = shard_.rows(shape_.rows);
  Tensor bias = host({1});
  bias.data<float>()[0] = dense_[bias_offset_];
  out.push_back({"bias", bias});
  if (table) {
    Tensor first = host({rows, 1});
    for (int64_t r = 0; r < rows; ++r) first.data<float>()[r] = table_[r * width];
    out.push_back({"first_order.weight", first});
  }
  if (table && k > 0) {
    Tensor v = host({rows, k});
    float* dst = v.data<float>();
    for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * k, table_.data() + r * width + 1, sizeof(float) * k);
    out.push_back({"embedding.weight", v});
  }
  for (const DenseSegment& s : segments_) {
    if (s.name == "bias") continue;
    Tensor t = host(s.shape);
    std::memcpy(t.data<float>(), dense_.data() + s.offset, sizeof(float) * s.size);
    out.push_back({s.name, t});
  }
  for (size_t l = 0; l < running_mean_.size(); ++l) {
    const int64_t width = static_cast<int64_t>(running_mean_[l].size());
    const std::string name = "mlp." + std::to_string(l) + ".bn.";
    Tensor mean = host({width}), var = host({width});
    std::memcpy(mean.data<float>(), running_mean_[l].data(), sizeof(float) * width);
    std::memcpy(var.data<float>(), running_var_[l].data(), sizeof(float) * width);
    out.push_back({name + "running_mean", mean});
    out.push_back({name + "running_var", var});
  }
  return out;
}

NamedTensor CtrModel::table_view() {
  return {"table", Tensor::view_of(std::shared_ptr<void>(table_.data(), [](void*) {}), table_.data(),
                                   Shape{shard_.rows(shape_.rows), shape_.width()})};
}

void CtrModel::load(const std::vector<NamedTensor>& tensors, const std::string& what, bool table) {
  const auto find = [&](const std::string& name, std::vector<int64_t> dims) -> const float* {
    for (const NamedTensor& t : tensors) {
      if (t.name != name) continue;
      const Shape expected = dims;
      if (t.tensor.dtype() != DType::kF32 || t.tensor.shape() != expected)
        throw InputError(what + ": tensor '" + name + "' has shape " + shape_str(t.tensor.shape()) + ", the model's is " +
                         shape_str(expected) + " (model.table_rows, model.fields, model.embedding_size, model.hidden)");
      return t.tensor.data<float>();
    }
    throw InputError(what + ": no tensor '" + name + "' (is it a " +
                     (shape_.kind == CtrModelKind::kDeepFm ? "deepfm" : shape_.kind == CtrModelKind::kFm ? "fm" : "lr") +
                     " model of this shape?)");
  };
  const int width = shape_.width(), k = shape_.k();
  const int64_t rows = shard_.rows(shape_.rows);
  dense_[bias_offset_] = find("bias", {1})[0];
  if (table) {
    const float* first = find("first_order.weight", {rows, 1});
    for (int64_t r = 0; r < rows; ++r) table_[r * width] = first[r];
  }
  if (table && k > 0) {
    const float* v = find("embedding.weight", {rows, k});
    for (int64_t r = 0; r < rows; ++r) std::memcpy(table_.data() + r * width + 1, v + r * k, sizeof(float) * k);
  }
  for (const DenseSegment& s : segments_) {
    if (s.name == "bias") continue;
    std::memcpy(dense_.data() + s.offset, find(s.name, s.shape), sizeof(float) * s.size);
  }
  for (size_t l = 0; l < running_mean_.size(); ++l) {
    const int64_t width = static_cast<int64_t>(running_mean_[l].size());
    const std::string name = "mlp." + std::to_string(l) + ".bn.";
    std::memcpy(running_mean_[l].data(), find(name + "running_mean", {width}), sizeof(float) * width);
    std::memcpy(running_var_[l].data(), find(name + "running_var", {width}), sizeof(float) * width);
  }
}

}  // namespace sdp
