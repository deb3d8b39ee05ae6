#include "optim/optimizer_factory.hpp"

#include "core/error.hpp"
#include "optim/adam.hpp"
#include "optim/sgd.hpp"

namespace sdp {

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& spec, ParameterStore& store) {
  if (spec.name == "sgd") {
    SgdOptions o;
    o.momentum = spec.momentum;
    o.dampening = spec.dampening;
    o.nesterov = spec.nesterov;
    o.weight_decay = spec.weight_decay;
    o.decay_all = spec.decay_all;
    return std::make_unique<Sgd>(store, o);
  }
  if (spec.name == "adam" || spec.name == "adamw") {
    AdamOptions o;
    o.beta1 = spec.beta1;
    o.beta2 = spec.beta2;
    o.eps = spec.eps;
    o.weight_decay = spec.weight_decay;
    o.decoupled = spec.name == "adamw";
    o.decay_all = spec.decay_all;
    return std::make_unique<Adam>(store, o);
  }
  throw InputError("optimizer: unknown name '" + spec.name + "' (expected sgd, adam or adamw)");
}

}  // namespace sdp
