#include "config/did_you_mean.hpp"

#include <algorithm>
#include <utility>

namespace sdp {

std::vector<std::string> closest_names(const std::string& name,
                                       const std::vector<std::string>& candidates,
                                       std::size_t max_results) {
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      std::size_t diag = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j) {
        std::size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
        diag = up;
      }
    }
    return row[b.size()];
  };
  auto leaf = [](const std::string& p) {
    auto dot = p.rfind('.');
    return dot == std::string::npos ? p : p.substr(dot + 1);
  };
  std::vector<std::pair<std::size_t, std::string>> scored;
  for (const auto& c : candidates) {
    // Compare whole paths and leaf names, so "optimizer.lrr" and "data.lr" both find lr.
    std::size_t d = std::min(distance(name, c), distance(leaf(name), leaf(c)) + 1);
    std::size_t limit = std::max<std::size_t>(2, leaf(name).size() / 3);
    if (d <= limit) scored.emplace_back(d, c);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && out.size() < max_results; ++i)
    out.push_back(scored[i].second);
  return out;
}

std::string unknown_value_message(const std::string& value,
                                  const std::vector<std::string>& choices) {
  std::string msg = "unknown value '" + value + "' (expected one of: ";
  for (std::size_t i = 0; i < choices.size(); ++i) msg += (i ? ", " : "") + choices[i];
  msg += ")";
  auto close = closest_names(value, choices, 1);
  if (!close.empty()) msg += "; did you mean '" + close[0] + "'?";
  return msg;
}

}  // namespace sdp
