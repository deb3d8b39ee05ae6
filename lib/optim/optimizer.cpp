#include "optim/optimizer.hpp"

#include <stdexcept>
#include <string>

#include "core/device_memory.hpp"
#include "core/error.hpp"

namespace sdp {

Optimizer::Optimizer(ParameterStore& store, float weight_decay, bool decay_all) : store_(store) {
  if (!store.finalized())
    throw std::logic_error("optimizer: the ParameterStore must be finalized first");
  const int64_t arena = store.param_arena().numel();
  const auto& params = store.params();
  if (decay_all || weight_decay == 0.0f) {
    // One range over the whole arena: the padding has zero params and zero grads, so
    // updating it changes nothing, and the loop stays one long vectorizable run.
    segments_.push_back({0, arena, weight_decay});
  } else {
    // Runs of parameters with the same flag; each run extends to the next parameter so
    // the padding between them is covered (harmlessly) and runs stay few.
    for (std::size_t i = 0; i < params.size(); ++i) {
      float wd = params[i].weight_decay ? weight_decay : 0.0f;
      int64_t end = i + 1 < params.size() ? params[i + 1].offset : arena;
      if (!segments_.empty() && segments_.back().weight_decay == wd)
        segments_.back().count = end - segments_.back().begin;
      else
        segments_.push_back({params[i].offset, end - params[i].offset, wd});
    }
  }
  std::vector<multi_tensor::Group> groups;
  for (const Segment& seg : segments_) groups.push_back({seg.begin, seg.count});
  segment_chunks_ = multi_tensor::split_into_chunks(groups);
  groups.clear();
  for (const Param& p : params) groups.push_back({p.offset, shape_numel(p.shape)});
  parameter_chunks_ = multi_tensor::split_into_chunks(groups);
}

void Optimizer::step(float lr) {
  update(lr, step_count_ + 1);
  ++step_count_;
}

bool Optimizer::step_checking_gradients(float lr) {
  // A GPU update does not read the gradients for this: a separate check runs first, and a
  // non-finite gradient leaves the weights untouched.
  if (!checks_gradients_in_update() && !store_.grad_arena().all_finite(stream_)) return false;
  const bool finite = update(lr, step_count_ + 1);
  ++step_count_;
  return finite;
}

void Optimizer::read_scalars_from_device(const cuda_updates::StepScalars* scalars, const int32_t* skip) {
  if (checks_gradients_in_update())
    throw std::logic_error(std::string("optimizer ") + name() + ": only a GPU update reads its scalars from the device");
  device_scalars_ = scalars;
  device_skip_ = skip;
}

cuda_updates::StepScalars Optimizer::step_scalars(float lr, int64_t t) const {
  cuda_updates::StepScalars s;
  s.lr = lr;
  s.first = t == 1 ? 1 : 0;
  return s;
}

void throw_no_update(const char* kind, const Device& device) {
  throw InputError(std::string(kind) + " has no update for device " + device.str() + " in this build of sdp-train");
}

float* Optimizer::add_state(const std::string& kind) {
  const MemoryPurposeScope purpose(MemoryPurpose::kOptimizer);
  state_.push_back({kind, Tensor({store_.param_arena().numel()}, DType::kF32, store_.device())});
  return state_.back().tensor.data<float>();
}

std::vector<NamedTensor> Optimizer::state_tensors() const {
  std::vector<NamedTensor> out;
  for (const NamedTensor& arena : state_)
    for (const Param& p : store_.params())
      out.push_back({p.name + "." + arena.name,
                     arena.tensor.slice(p.offset, shape_numel(p.shape)).reshaped(p.shape)});
  return out;
}

}  // namespace sdp
