#include "ctr/ctr_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace sdp {

double binary_auc(const float* scores, const float* labels, int64_t n) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return scores[a] < scores[b]; });
  // Sum of the positives' ranks (1-based, ties given their average rank).
  double positive_rank_sum = 0;
  int64_t positives = 0;
  for (int64_t i = 0; i < n;) {
    int64_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    const double average_rank = 0.5 * static_cast<double>(i + 1 + j);
    for (int64_t t = i; t < j; ++t)
      if (labels[order[t]] > 0.5f) {
        positive_rank_sum += average_rank;
        ++positives;
      }
    i = j;
  }
  const int64_t negatives = n - positives;
  if (positives == 0 || negatives == 0) return std::numeric_limits<double>::quiet_NaN();
  const double p = static_cast<double>(positives);
  return (positive_rank_sum - p * (p + 1) / 2) / (p * static_cast<double>(negatives));
}

double binary_log_loss(const float* prob, const float* labels, int64_t n) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double p = std::clamp(static_cast<double>(prob[i]), 1e-7, 1.0 - 1e-7);
    total -= labels[i] > 0.5f ? std::log(p) : std::log(1.0 - p);
  }
  return n > 0 ? total / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace sdp
