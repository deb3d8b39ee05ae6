#include "config/lr_scaling.hpp"

#include <cmath>
#include <sstream>

namespace sdp {

double LrScaling::multiplier(double batch_ratio) const {
  switch (kind) {
    case Kind::kNone:
      return 1.0;
    case Kind::kLinear:
      return batch_ratio;
    case Kind::kSqrt:
      return std::sqrt(batch_ratio);
    case Kind::kFactor:
      return factor;
  }
  return 1.0;
}

std::string LrScaling::str() const {
  switch (kind) {
    case Kind::kNone:
      return "none";
    case Kind::kLinear:
      return "linear";
    case Kind::kSqrt:
      return "sqrt";
    case Kind::kFactor: {
      std::ostringstream out;
      out << "factor " << factor;
      return out.str();
    }
  }
  return "?";
}

}  // namespace sdp
