// Metrics of binary predictions over a whole set (not per-batch averages).
#pragma once

#include <cstdint>

namespace sdp {

// The area under the ROC curve: the probability that a random positive scores above a random
// negative, ties counting a half (the Mann-Whitney U statistic, exact; sorts a copy). NaN when
// the labels are all one class.
double binary_auc(const float* scores, const float* labels, int64_t n);

// Mean sigmoid log loss of probabilities `prob` against 0/1 labels, probabilities clipped to
// [1e-7, 1 - 1e-7] as Keras and scikit-learn do.
double binary_log_loss(const float* prob, const float* labels, int64_t n);

}  // namespace sdp
