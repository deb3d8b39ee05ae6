#include "config/json_file.hpp"

#include <fstream>

#include "core/error.hpp"

namespace sdp {

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw InputError(what + " '" + path + "' not found or not readable");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(path + ": malformed JSON at byte " + std::to_string(e.byte) + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {  // out_of_range: a number like 1e999
    throw InputError(path + ": malformed JSON: " + e.what());
  }
}

}  // namespace sdp
