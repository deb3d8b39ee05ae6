// Which half of a data set a reader loads.
#pragma once

namespace sdp {

enum class Split { kTrain, kTest };

inline const char* split_name(Split split) {
  return split == Split::kTrain ? "train" : "test";
}

}  // namespace sdp
