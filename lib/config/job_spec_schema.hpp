// The job spec's schema: every key of JobSpec once, with how to read it from a YAML node and
// write it back. The loader (every source: YAML, hyperparameters.json, --set) and
// job_spec_to_yaml both walk it, so types, messages and the printed spec agree.
// Internal to lib/config.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>
#include <vector>

#include "config/job_spec.hpp"

namespace sdp {

// Thrown by a field's converter; the caller adds source and key.
struct BadValue {
  std::string what;
};

struct JobSpecField {
  std::string path;        // "optimizer.lr"
  bool is_string = false;  // free text: ${VAR} is expanded in finish(), not before
  std::function<void(JobSpec&, const YAML::Node&)> assign;  // throws BadValue
  std::function<void(YAML::Emitter&, const JobSpec&)> emit;
  std::function<std::string&(JobSpec&)> string_ref;  // is_string only, for ${VAR} expansion
};

// Every key, in document order.
const std::vector<JobSpecField>& job_spec_schema();
// The field at `path`, or null.
const JobSpecField* find_field(const std::string& path);
// True when `path` is a section (model, data.synthetic, ...), i.e. a prefix of some key.
bool is_section(const std::string& path);
// "unknown key 'x'", with the closest key paths as suggestions.
std::string unknown_key_message(const std::string& path);

}  // namespace sdp
