#include "data/sets/sample_set.hpp"

#include "data/loading/batch_assembler.hpp"
#include "data/loading/data_loader.hpp"

namespace sdp {

std::unique_ptr<SampleAssembler> DatasetSamples::make_assembler(const AugmentOptions& augment) const {
  return std::make_unique<BatchAssembler>(*dataset_, augment);
}

std::unique_ptr<TrainLoader> SampleSet::make_train_loader(const LoaderOptions& options) const {
  return std::make_unique<IndexedTrainLoader>(*this, options);
}

std::unique_ptr<EvalLoader> SampleSet::make_eval_loader(int64_t batch_size, int rank, int world, int prefetch) const {
  return std::make_unique<IndexedEvalLoader>(*this, batch_size, rank, world, prefetch);
}

}  // namespace sdp
