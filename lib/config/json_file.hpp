// Reading a JSON file the user or SageMaker gave us (resourceconfig.json,
// hyperparameters.json): one place for the "not found" and "malformed" messages.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sdp {

// The parsed document at `path`. Throws InputError "<what> '<path>' not found or not readable"
// or "<path>: malformed JSON at byte N: ...". `what` names the file's role in messages
// ("resource config", "hyperparameters file").
nlohmann::json read_json_file(const std::string& path, const std::string& what);

}  // namespace sdp
