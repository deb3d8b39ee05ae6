// ${VAR} and ${VAR:-default} in job spec values, so one spec serves SageMaker (SM_CHANNEL_*,
// SM_MODEL_DIR, ...) and a laptop.
#pragma once

#include <string>

namespace sdp {

// Expands ${VAR} and ${VAR:-default} in `text` from the environment; defaults may nest
// (${SM_CHANNEL_TRAINING:-${DATA:-data}/mnist}). An unset variable without a default throws
// InputError naming `where` (source and key).
std::string expand_env_vars(const std::string& text, const std::string& where);

}  // namespace sdp
