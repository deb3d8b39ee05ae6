#include "optim/lr_scaling.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/error.hpp"

namespace sdp {

LrScaling LrScaling::parse(const std::string& text) {
  if (text == "none") return none();
  if (text == "linear") return linear();
  if (text == "sqrt") return sqrt();
  char* end = nullptr;
  const double factor = std::strtod(text.c_str(), &end);
  if (end != text.c_str() && *end == '\0' && std::isfinite(factor) && factor > 0) return explicit_factor(factor);
  throw InputError("lr_scaling: unknown value '" + text + "' (expected none, linear, sqrt or a positive factor)");
}

double LrScaling::multiplier(int world_size) const {
  switch (kind) {
    case Kind::kNone:
      return 1.0;
    case Kind::kLinear:
      return world_size;
    case Kind::kSqrt:
      return std::sqrt(static_cast<double>(world_size));
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
