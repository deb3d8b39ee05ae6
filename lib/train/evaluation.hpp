// Evaluation on the test split, every rank reading its share, and the averaging of the
// BatchNorm running statistics that comes before it (and before the model is saved).
#pragma once

#include <cstdint>
#include <vector>

#include "config/job_spec.hpp"
#include "data/sets/sample_set.hpp"
#include "distributed/communicator.hpp"
#include "distributed/watchdog.hpp"
#include "distributed/world.hpp"
#include "nn/model.hpp"

namespace sdp {

struct EvalResult {
  double loss = 0, accuracy = 0;  // over the whole test split (all ranks)
  // Per label, when asked for (all ranks): test samples and top-1 hits.
  std::vector<int64_t> class_samples, class_hits;
};

// Collective: the mean test loss and top-1 accuracy; averages the buffers first (over `comm`,
// the world's communicator). With `watch`, both collectives are watched (reports say `step`).
EvalResult evaluate(nn::Model& model, const SampleSource& test, const JobSpec& spec, const World& world,
                    Communicator& comm, Watchdog* watch = nullptr, int64_t step = 0, bool per_class = false);

// Collective: BatchNorm running statistics were gathered from each rank's own batches; their
// mean is what the global model has seen, and it keeps the replicas identical.
void average_buffers(nn::Model& model, Communicator& comm);

}  // namespace sdp
