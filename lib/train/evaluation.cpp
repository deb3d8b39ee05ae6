#include "train/evaluation.hpp"

#include "data/loading/data_loader.hpp"
#include "distributed/collectives.hpp"
#include "train/training_setup.hpp"

namespace sdp {

void average_buffers(nn::Model& model, Communicator& comm) {
  comm.allreduce(CommBuffer::of(model.store().buffer_arena()), {ReduceOp::kAvg})->wait();
}

EvalResult evaluate(nn::Model& model, const SampleSource& test, const JobSpec& spec, const World& world,
                    Communicator& comm, Watchdog* watch, int64_t step, bool per_class) {
  run_watched(watch, step, "evaluation buffer average", [&] { average_buffers(model, comm); });

  const auto [reader, readers] = data_reader(spec, spec.data.test, world);
  const auto loader = test.make_eval_loader(spec.data.batch_size, reader, readers, spec.data.prefetch);
  loader->start();
  // loss sum, correct, samples; then, per class, samples and hits.
  const auto classes = static_cast<std::size_t>(per_class ? model.num_classes() : 0);
  std::vector<double> totals(3 + 2 * classes, 0.0);
  std::vector<uint8_t> hits;
  while (const Batch* batch = loader->next()) {
    int64_t correct = 0;
    hits.resize(per_class ? static_cast<std::size_t>(batch->size()) : 0);
    float loss = model.forward(batch->images, batch->labels.data(), /*training=*/false, &correct,
                               per_class ? hits.data() : nullptr);
    totals[0] += static_cast<double>(loss) * batch->size();
    totals[1] += static_cast<double>(correct);
    totals[2] += static_cast<double>(batch->size());
    for (std::size_t i = 0; i < hits.size(); ++i) {
      const auto label = static_cast<std::size_t>(batch->labels[i]);
      totals[3 + label] += 1.0;
      totals[3 + classes + label] += hits[i];
    }
  }
  run_watched(watch, step, "evaluation allreduce",
              [&] { allreduce_sum(world.comm(), totals.data(), static_cast<int>(totals.size())); });
  EvalResult result{totals[0] / totals[2], totals[1] / totals[2], {}, {}};
  for (std::size_t c = 0; c < classes; ++c) {
    result.class_samples.push_back(static_cast<int64_t>(totals[3 + c]));
    result.class_hits.push_back(static_cast<int64_t>(totals[3 + classes + c]));
  }
  return result;
}

}  // namespace sdp
