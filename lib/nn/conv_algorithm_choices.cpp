#include "nn/conv_algorithm_choices.hpp"

#include <sstream>

#include "core/error.hpp"

namespace sdp::nn {

std::string format_conv_algorithm_choices(const ConvAlgorithmChoices& choices) {
  std::ostringstream out;
  out << choices.library << "\n";
  for (const auto& [shape, c] : choices.by_shape)
    out << shape << " = " << c.forward << " " << c.backward_filter << " " << c.backward_data << " "
        << c.forward_workspace << " " << c.backward_workspace << "\n";
  return out.str();
}

ConvAlgorithmChoices parse_conv_algorithm_choices(const std::string& text, const std::string& what) {
  ConvAlgorithmChoices choices;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  const auto bad = [&](const std::string& why) {
    return InputError(what + ": line " + std::to_string(number) + ": " + why + " ('" + line + "')");
  };
  while (std::getline(in, line)) {
    ++number;
    if (number == 1) {
      if (line.empty()) throw bad("no library and GPU named");
      choices.library = line;
      continue;
    }
    if (line.empty()) continue;
    const std::size_t eq = line.find(" = ");
    if (eq == std::string::npos || eq == 0) throw bad("not '<shape> = <algorithms>'");
    ConvAlgorithmChoice c;
    std::istringstream values(line.substr(eq + 3));
    if (!(values >> c.forward >> c.backward_filter >> c.backward_data >> c.forward_workspace >> c.backward_workspace))
      throw bad("expected three algorithm numbers and two workspace sizes");
    std::string rest;
    if (values >> rest) throw bad("unexpected '" + rest + "'");
    if (c.forward < 0 || c.backward_filter < 0 || c.backward_data < 0) throw bad("a negative algorithm number");
    if (!choices.by_shape.emplace(line.substr(0, eq), c).second) throw bad("the shape twice");
  }
  if (number == 0) throw InputError(what + ": empty");
  return choices;
}

}  // namespace sdp::nn
