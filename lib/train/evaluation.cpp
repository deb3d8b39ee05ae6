#include "train/evaluation.hpp"

#include "data/loading/data_loader.hpp"
#include "distributed/collectives.hpp"
#include "train/training_setup.hpp"

namespace sdp {

void average_buffers(nn::Model& model, Communicator& comm) {
  comm.allreduce(CommBuffer::of(model.store().buffer_arena()), {ReduceOp::kAvg})->wait();
}

EvalResult evaluate(nn::Model& model, const SampleSource& test, const JobSpec& spec, const World& world,
                    Communicator& comm, Watchdog* watch, int64_t step) {
  run_watched(watch, step, "evaluation buffer average", [&] { average_buffers(model, comm); });

  const auto [reader, readers] = data_reader(spec, spec.data.test, world);
  const auto loader = test.make_eval_loader(spec.data.batch_size, reader, readers, spec.data.prefetch);
  loader->start();
  double totals[3] = {0, 0, 0};  // loss sum, correct, samples
  while (const Batch* batch = loader->next()) {
    int64_t correct = 0;
    float loss = model.forward(batch->images, batch->labels.data(), /*training=*/false, &correct);
    totals[0] += static_cast<double>(loss) * batch->size();
    totals[1] += static_cast<double>(correct);
    totals[2] += static_cast<double>(batch->size());
  }
  run_watched(watch, step, "evaluation allreduce", [&] { allreduce_sum(world.comm(), totals, 3); });
  return {totals[0] / totals[2], totals[1] / totals[2]};
}

}  // namespace sdp
