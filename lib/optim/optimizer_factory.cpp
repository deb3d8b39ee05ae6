#include "optim/optimizer_factory.hpp"

#include <stdexcept>

#include "optim/adam.hpp"
#include "optim/lamb.hpp"
#include "optim/lars.hpp"
#include "optim/sgd.hpp"

namespace sdp {

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& spec, ParameterStore& store) {
  switch (spec.kind) {
    case OptimizerKind::kSgd: {
      SgdOptions o;
      o.momentum = spec.momentum;
      o.dampening = spec.dampening;
      o.nesterov = spec.nesterov;
      o.weight_decay = spec.weight_decay;
      o.decay_all = spec.decay_all;
      return Sgd::create(store, o);
    }
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW: {
      AdamOptions o;
      o.beta1 = spec.beta1;
      o.beta2 = spec.beta2;
      o.eps = spec.eps;
      o.weight_decay = spec.weight_decay;
      o.decoupled = spec.kind == OptimizerKind::kAdamW;
      o.decay_all = spec.decay_all;
      return Adam::create(store, o);
    }
    case OptimizerKind::kLars: {
      LarsOptions o;
      o.momentum = spec.momentum;
      o.weight_decay = spec.weight_decay;
      o.trust_coefficient = spec.trust_coefficient;
      o.eps = spec.eps;
      return Lars::create(store, o);
    }
    case OptimizerKind::kLamb: {
      LambOptions o;
      o.beta1 = spec.beta1;
      o.beta2 = spec.beta2;
      o.eps = spec.eps;
      o.weight_decay = spec.weight_decay;
      return Lamb::create(store, o);
    }
    case OptimizerKind::kAdagrad:
    case OptimizerKind::kFtrl:
      // The job spec's validation keeps them to the CTR models (ctr/ctr_optimizer.hpp).
      throw std::logic_error("make_optimizer: adagrad and ftrl are the CTR models' optimizers");
  }
  throw std::logic_error("make_optimizer: unhandled OptimizerKind");
}

}  // namespace sdp
