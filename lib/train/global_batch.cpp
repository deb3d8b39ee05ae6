#include "train/global_batch.hpp"

#include <sstream>

#include "optim/lr_schedule.hpp"

namespace sdp {

std::string GlobalBatch::str() const {
  std::ostringstream out;
  out << size() << " (" << per_rank << " x " << ranks << (ranks == 1 ? " rank" : " ranks") << " x "
      << accumulate << ")";
  return out.str();
}

GlobalBatch global_batch(const JobSpec& spec, int world_size) {
  return {spec.data.batch_size, world_size, spec.train.accumulate_steps};
}

int64_t reference_batch(const JobSpec& spec) {
  return spec.optimizer.reference_batch > 0 ? spec.optimizer.reference_batch : spec.data.batch_size;
}

double peak_lr(const JobSpec& spec, int world_size) {
  return scaled_lr(spec.optimizer.lr, spec.optimizer.lr_scaling,
                   global_batch(spec, world_size).size(), reference_batch(spec));
}

std::string describe_lr_rule(const JobSpec& spec, int world_size) {
  std::ostringstream out;
  out << "global batch " << global_batch(spec, world_size).str() << ", lr " << spec.optimizer.lr
      << " @ " << reference_batch(spec) << " -> " << peak_lr(spec, world_size) << " ("
      << spec.optimizer.lr_scaling.str() << ")";
  return out.str();
}

}  // namespace sdp
