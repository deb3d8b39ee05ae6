#include "ctr/ctr_optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "ctr/ctr_kernels.hpp"
#include "optim/dense_update_kernels.hpp"

namespace sdp {

CtrOptimizer::CtrOptimizer(const OptimizerSpec& spec, double l2, CtrModel& model)
    : kind_(spec.name), spec_(spec), l2_(static_cast<float>(l2)), model_(model) {
  const size_t table = model.table().size(), dense = model.dense().size();
  const auto add = [&](const std::string& name, float start) {
    slots_.push_back({name, std::vector<float>(table, start), std::vector<float>(dense, start)});
  };
  switch (kind_) {
    case OptimizerKind::kSgd:
      if (spec.momentum > 0) add("momentum", 0.0f);
      break;
    case OptimizerKind::kAdam:
      add("m", 0.0f);
      add("v", 0.0f);
      break;
    case OptimizerKind::kAdagrad:
      add("accumulator", static_cast<float>(spec.initial_accumulator));
      break;
    case OptimizerKind::kFtrl:
      add("z", 0.0f);
      add("n", static_cast<float>(spec.initial_accumulator));
      break;
    default:
      throw std::logic_error("CtrOptimizer: " + to_string(kind_) + " is not a CTR optimizer (validated)");
  }
}

int CtrOptimizer::table_state_floats(const OptimizerSpec& spec) {
  switch (spec.name) {
    case OptimizerKind::kAdam:
    case OptimizerKind::kFtrl: return 2;
    case OptimizerKind::kAdagrad: return 1;
    default: return spec.momentum > 0 ? 1 : 0;
  }
}

void CtrOptimizer::update(float* p, const float* g, int64_t n, int64_t offset, bool table, float lr, float l2) {
  const auto state = [&](size_t i) { return (table ? slots_[i].table.data() : slots_[i].dense.data()) + offset; };
  switch (kind_) {
    case OptimizerKind::kSgd:
      if (slots_.empty())
        dense_update_kernels().sgd(p, g, n, lr, l2);
      else
        // TensorFlow's momentum (no dampening, buffer starts at 0): buf = mu buf + g + l2 p.
        dense_update_kernels().sgd_momentum(p, g, state(0), n, lr, l2, static_cast<float>(spec_.momentum), 1.0f,
                                            /*first=*/false, spec_.nesterov);
      break;
    case OptimizerKind::kAdam: {
      AdamChunkScalars s{};
      s.beta1 = static_cast<float>(spec_.beta1);
      s.beta2 = static_cast<float>(spec_.beta2);
      s.eps = static_cast<float>(spec_.eps);
      s.step_size = step_size_;
      s.bias2_sqrt = bias2_sqrt_;
      s.l2 = l2;
      s.decay = false;
      s.shrink = 1.0f;
      dense_update_kernels().adam(p, g, state(0), state(1), n, s);
      break;
    }
    case OptimizerKind::kAdagrad:
      ctr_kernels().adagrad(p, g, state(0), n, lr, l2, static_cast<float>(spec_.eps));
      break;
    case OptimizerKind::kFtrl:
      ctr_kernels().ftrl(p, g, state(0), state(1), n, lr, static_cast<float>(spec_.l1), l2);
      break;
    default:
      break;
  }
}

void CtrOptimizer::step(float lr, const std::vector<float>& dense_grad, const SparseRows& table_grad) {
  ++steps_;
  if (kind_ == OptimizerKind::kAdam) {
    const double t = static_cast<double>(steps_);
    step_size_ = static_cast<float>(lr / (1.0 - std::pow(spec_.beta1, t)));
    bias2_sqrt_ = static_cast<float>(std::sqrt(1.0 - std::pow(spec_.beta2, t)));
  }
  // The dense parameters in chunks over the threads (element-wise rules: any split, same bits).
  std::vector<float>& dense = model_.dense();
  constexpr int64_t kChunk = 8192;
  chunks_.clear();
  for (const DenseSegment& s : model_.segments())
    for (int64_t at = 0; at < s.size; at += kChunk)
      chunks_.push_back({s.offset + at, std::min(kChunk, s.size - at), s.decays});
  const int64_t chunk_count = static_cast<int64_t>(chunks_.size());
  const int width = table_grad.width;
  float* table = model_.table().data();
  const int64_t rows = table_grad.size();
  // The rows lie scattered over tables larger than the caches: fetch a few rows ahead.
  constexpr int64_t kAhead = 4;
  const int64_t row_bytes = static_cast<int64_t>(sizeof(float)) * width;
  // The dense parameters and the table's rows are apart: no barrier between the two loops.
#pragma omp parallel
  {
#pragma omp for schedule(static) nowait
    for (int64_t c = 0; c < chunk_count; ++c) {
      const Chunk& k = chunks_[c];
      update(dense.data() + k.offset, dense_grad.data() + k.offset, k.size, k.offset, false, lr,
             k.decays ? l2_ : 0.0f);
    }
#pragma omp for schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      if (i + kAhead < rows) {
        const int64_t ahead = table_grad.ids[i + kAhead] * width;
        for (int64_t byte = 0; byte < row_bytes; byte += 64) {
          __builtin_prefetch(reinterpret_cast<const char*>(table + ahead) + byte, 1);
          for (const Slot& slot : slots_)
            __builtin_prefetch(reinterpret_cast<const char*>(slot.table.data() + ahead) + byte, 1);
        }
      }
      const int64_t offset = table_grad.ids[i] * width;
      update(table + offset, table_grad.row(i), width, offset, true, lr, l2_);
    }
  }
}

std::vector<NamedTensor> CtrOptimizer::state_tensors(bool table) const {
  std::vector<NamedTensor> out;
  const int width = model_.shape().width();
  for (const Slot& slot : slots_) {
    if (table) {
      Tensor t(Shape{model_.shard().rows(model_.shape().rows), width});
      std::memcpy(t.data<float>(), slot.table.data(), sizeof(float) * slot.table.size());
      out.push_back({"optimizer." + slot.name + ".table", t});
    }
    Tensor d(Shape{static_cast<int64_t>(slot.dense.size())});
    std::memcpy(d.data<float>(), slot.dense.data(), sizeof(float) * slot.dense.size());
    out.push_back({"optimizer." + slot.name + ".dense", d});
  }
  // The step count as two exact floats (safetensors holds f32 here): high and low 24 bits.
  Tensor steps(Shape{2});
  steps.data<float>()[0] = static_cast<float>(steps_ >> 24);
  steps.data<float>()[1] = static_cast<float>(steps_ & 0xffffff);
  out.push_back({"optimizer.steps", steps});
  return out;
}

std::vector<NamedTensor> CtrOptimizer::table_state_views() {
  std::vector<NamedTensor> out;
  const int64_t rows = model_.shard().rows(model_.shape().rows);
  for (Slot& slot : slots_)
    out.push_back({"optimizer." + slot.name + ".table",
                   Tensor::view_of(std::shared_ptr<void>(slot.table.data(), [](void*) {}), slot.table.data(),
                                   Shape{rows, model_.shape().width()})});
  return out;
}

void CtrOptimizer::load_state(const std::vector<NamedTensor>& tensors, const std::string& what, bool table) {
  const auto find = [&](const std::string& name, size_t count) -> const float* {
    for (const NamedTensor& t : tensors)
      if (t.name == name) {
        if (t.tensor.dtype() != DType::kF32 || static_cast<size_t>(t.tensor.numel()) != count)
          throw InputError(what + ": optimizer state '" + name + "' has " + std::to_string(t.tensor.numel()) +
                           " values, this job's has " + std::to_string(count));
        return t.tensor.data<float>();
      }
    throw InputError(what + ": no optimizer state '" + name + "': was it written with optimizer.name " +
                     to_string(kind_) + "?");
  };
  for (Slot& slot : slots_) {
    if (table)
      std::memcpy(slot.table.data(), find("optimizer." + slot.name + ".table", slot.table.size()),
                  sizeof(float) * slot.table.size());
    std::memcpy(slot.dense.data(), find("optimizer." + slot.name + ".dense", slot.dense.size()),
                sizeof(float) * slot.dense.size());
  }
  const float* steps = find("optimizer.steps", 2);
  steps_ = (static_cast<int64_t>(steps[0]) << 24) + static_cast<int64_t>(steps[1]);
}

int64_t CtrOptimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const Slot& s : slots_) bytes += static_cast<int64_t>(sizeof(float) * (s.table.size() + s.dense.size()));
  return bytes;
}

}  // namespace sdp
