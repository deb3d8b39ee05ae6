// Context: what every layer of one model shares — the parameter store it registers into,
// the oneDNN stream it runs on, and the grad-ready hook backward reports to.
#pragma once

#include <cstdint>
#include <functional>

#include "core/parameter_store.hpp"
#include "nn/onednn.hpp"

namespace sdp::nn {

using GradReadyHook = std::function<void(const Param&)>;

struct Context {
  explicit Context(ParameterStore& store_ref, uint64_t seed_value = 42)
      : store(store_ref), stream(cpu_engine()), seed(seed_value) {}

  ParameterStore& store;
  // CPU streams run every primitive synchronously on the calling thread (OpenMP inside).
  dnnl::stream stream;
  GradReadyHook grad_ready_hook;  // may be empty
  uint64_t seed;                  // base seed for stochastic layers (dropout)
};

}  // namespace sdp::nn
