// Bytes from a data file (a tar member name, an Example's feature key) made safe to print in
// an error message: quoted, non-printable bytes as \xNN, cut at a length a terminal line
// can hold, since a hostile or corrupt file can put anything there.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace sdp {

inline std::string printable(std::string_view bytes, std::size_t max_chars = 200) {
  std::string out = "'";
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (out.size() > max_chars) {
      out += "...(" + std::to_string(bytes.size()) + " bytes)";
      break;
    }
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      out += esc;
    }
  }
  return out + "'";
}

}  // namespace sdp
