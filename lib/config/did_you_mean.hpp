// "Did you mean ...?" for unknown keys and values: the candidates closest by edit distance.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace sdp {

// Closest candidates by edit distance, best first; none when nothing is near. Dotted key
// paths are also compared by their last part, so "data.lr" finds "optimizer.lr".
std::vector<std::string> closest_names(const std::string& name,
                                       const std::vector<std::string>& candidates,
                                       std::size_t max_results = 3);

// "unknown value 'x' (expected one of: a, b, c)", plus "; did you mean 'y'?" when one of
// `choices` is close. The caller adds where the value came from.
std::string unknown_value_message(const std::string& value,
                                  const std::vector<std::string>& choices);

}  // namespace sdp
