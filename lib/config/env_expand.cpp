#include "config/env_expand.hpp"

#include <cstdlib>

#include "core/error.hpp"

namespace sdp {

std::string expand_env_vars(const std::string& text, const std::string& where) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, 2, "${") != 0) {
      out += text[i++];
      continue;
    }
    // Find the matching '}', so defaults may nest: ${SM_CHANNEL_TRAINING:-${DATA:-data}/mnist}.
    std::size_t close = i + 2;
    for (int depth = 1; close < text.size(); ++close) {
      if (text.compare(close, 2, "${") == 0) {
        ++depth;
        ++close;
      } else if (text[close] == '}' && --depth == 0) {
        break;
      }
    }
    if (close >= text.size()) throw InputError(where + ": unterminated '${' in '" + text + "'");
    std::string body = text.substr(i + 2, close - i - 2);
    std::string var = body, fallback;
    bool has_default = false;
    if (auto pos = body.find(":-"); pos != std::string::npos) {
      var = body.substr(0, pos);
      fallback = body.substr(pos + 2);
      has_default = true;
    }
    if (var.empty()) throw InputError(where + ": empty variable name in '" + text + "'");
    const char* value = std::getenv(var.c_str());
    if (value != nullptr && *value != '\0') {
      out += value;
    } else if (has_default) {
      out += expand_env_vars(fallback, where);
    } else {
      throw InputError(where + ": environment variable " + var +
                       " is not set and has no default (write ${" + var + ":-default})");
    }
    i = close + 1;
  }
  return out;
}

}  // namespace sdp
