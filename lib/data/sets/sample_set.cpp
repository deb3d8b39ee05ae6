#include "data/sets/sample_set.hpp"

#include "data/loading/batch_assembler.hpp"

namespace sdp {

std::unique_ptr<SampleAssembler> DatasetSamples::make_assembler(const AugmentOptions& augment) const {
  return std::make_unique<BatchAssembler>(*dataset_, augment);
}

}  // namespace sdp
