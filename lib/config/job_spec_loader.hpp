// Builds a JobSpec from its sources in precedence order:
//   defaults < YAML file < hyperparameters.json < --set key.path=value
// Every key of JobSpec is described once in a schema (job_spec_schema.hpp); all sources go
// through it, so types, "did you mean" suggestions and error messages are the same for each.
// Errors are sdp::InputError naming the source (file:line for YAML) and the key path.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "config/job_spec.hpp"

namespace sdp {

class JobSpecLoader {
 public:
  JobSpecLoader();

  // Reads a YAML job file. Unknown keys, wrong types and malformed YAML throw.
  void apply_yaml_file(const std::string& path);
  // Applies a YAML document given as text (`source` names it in errors).
  void apply_yaml_text(const std::string& text, const std::string& source);
  // SageMaker hyperparameters.json: a flat object {"optimizer.lr": "0.1", ...}. Values
  // are strings (SageMaker JSON-encodes them), converted to the key's type. Keys starting
  // with "sagemaker_" belong to the SageMaker toolkit and are skipped.
  void apply_hyperparameters_file(const std::string& path);
  // One "key.path=value" override from the command line.
  void apply_override(const std::string& assignment, const std::string& source = "--set");

  // Expands ${VAR} / ${VAR:-default} in string values (including defaults), checks ranges
  // and names, and returns the finished spec.
  JobSpec finish() const;

  // Where each key's value came from ("default", "job.yaml:12", "--set", ...).
  const std::map<std::string, std::string>& sources() const { return sources_; }

  // Every key path the schema knows, in document order.
  static std::vector<std::string> key_paths();

 private:
  JobSpec spec_;
  std::map<std::string, std::string> sources_;
};

}  // namespace sdp
