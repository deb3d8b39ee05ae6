#include "config/job_spec_loader.hpp"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "config/env_expand.hpp"
#include "config/job_spec_schema.hpp"
#include "config/job_spec_validate.hpp"
#include "config/json_file.hpp"
#include "core/error.hpp"

namespace sdp {

namespace {

// Non-string values may use ${VAR} too (e.g. epochs: ${EPOCHS:-5}); they are expanded
// before conversion. String values are expanded in finish(), defaults included.
YAML::Node expand_scalar_if_needed(const JobSpecField& field, const YAML::Node& node,
                                   const std::string& where) {
  if (field.is_string || !node.IsScalar() || node.Scalar().find("${") == std::string::npos)
    return node;
  return YAML::Node(expand_env_vars(node.Scalar(), where));
}

}  // namespace

JobSpecLoader::JobSpecLoader() {
  for (const JobSpecField& f : job_spec_schema()) sources_[f.path] = "default";
}

std::vector<std::string> JobSpecLoader::key_paths() {
  std::vector<std::string> paths;
  for (const JobSpecField& f : job_spec_schema()) paths.push_back(f.path);
  return paths;
}

void JobSpecLoader::apply_yaml_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("config file '" + path + "' not found or not readable");
  std::stringstream buffer;
  buffer << in.rdbuf();
  // An empty file (or comments only) is almost always a mistake (a failed copy, the wrong
  // path): training the defaults silently would hide it. Empty text from elsewhere (tests)
  // keeps every default; malformed YAML is reported with its line by apply_yaml_text.
  bool empty = false;
  try {
    empty = YAML::Load(buffer.str()).IsNull();
  } catch (const YAML::Exception&) {
  }
  if (empty) throw InputError("config file '" + path + "' is empty (no keys): give at least one key, e.g. model: {name: mlp}");
  apply_yaml_text(buffer.str(), path);
}

void JobSpecLoader::apply_yaml_text(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw InputError(source + ":" + std::to_string(e.mark.line + 1) + ":" +
                     std::to_string(e.mark.column + 1) + ": malformed YAML: " + e.msg);
  }
  if (root.IsNull()) return;  // an empty file keeps every default
  if (!root.IsMap())
    throw InputError(source + ":" + std::to_string(root.Mark().line + 1) +
                     ": the job spec must be a mapping of keys (name:, model:, data:, ...)");

  std::function<void(const YAML::Node&, const std::string&)> walk;
  walk = [&](const YAML::Node& map, const std::string& prefix) {
    std::set<std::string> seen;
    for (const auto& item : map) {
      // YAML allows any node as a key; ours are names. as<std::string>() of a list or a
      // mapping would throw yaml-cpp's BadConversion, which is not an InputError.
      if (!item.first.IsScalar() && !item.first.IsNull())
        throw InputError(source + ":" + std::to_string(item.first.Mark().line + 1) + ": " +
                         (prefix.empty() ? std::string("a top-level key") : "a key under '" + prefix + "'") +
                         " is not a key name (a list or a mapping is used as a key)");
      const std::string key = item.first.as<std::string>();
      const std::string path = prefix.empty() ? key : prefix + "." + key;
      const std::string where = source + ":" + std::to_string(item.first.Mark().line + 1);
      if (!seen.insert(key).second) throw InputError(where + ": key '" + path + "' appears twice");
      if (const JobSpecField* field = find_field(path)) {
        try {
          field->assign(
              spec_, expand_scalar_if_needed(*field, item.second, where + ": key '" + path + "'"));
        } catch (const BadValue& e) {
          throw InputError(where + ": key '" + path + "': " + e.what);
        }
        sources_[path] = where;
      } else if (is_section(path)) {
        if (item.second.IsNull()) continue;
        if (!item.second.IsMap())
          throw InputError(where + ": key '" + path + "' is a section; expected a mapping of keys");
        walk(item.second, path);
      } else {
        throw InputError(where + ": " + unknown_key_message(path));
      }
    }
  };
  walk(root, "");
}

namespace {
// SageMaker's SDK JSON-encodes every hyperparameter, so a string arrives as "\"sgd\"".
std::string strip_json_string_quotes(const std::string& text) {
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') {
    try {
      return nlohmann::json::parse(text).get<std::string>();
    } catch (const nlohmann::json::exception&) {
    }
  }
  return text;
}
}  // namespace

void JobSpecLoader::apply_override(const std::string& assignment, const std::string& source) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError(source + ": expected key.path=value, got '" + assignment + "'");
  const std::string path = assignment.substr(0, eq);
  const std::string text = strip_json_string_quotes(assignment.substr(eq + 1));
  const JobSpecField* field = find_field(path);
  if (field == nullptr) throw InputError(source + ": " + unknown_key_message(path));
  YAML::Node node;
  if (field->is_string) {
    node = YAML::Node(text);
  } else {
    try {
      node = YAML::Load(expand_env_vars(text, source + ": key '" + path + "'"));
    } catch (const YAML::ParserException&) {
      throw InputError(source + ": key '" + path + "': cannot parse value '" + text + "'");
    }
  }
  try {
    field->assign(spec_, node);
  } catch (const BadValue& e) {
    throw InputError(source + ": key '" + path + "': " + e.what);
  }
  sources_[path] = source;
}

void JobSpecLoader::apply_hyperparameters_file(const std::string& path) {
  const nlohmann::json doc = read_json_file(path, "hyperparameters file");
  if (!doc.is_object())
    throw InputError(path +
                     ": expected a JSON object of hyperparameters {\"key.path\": \"value\"}");
  // Nested objects are flattened with dots: {"optimizer": {"lr": 0.1}} == {"optimizer.lr": 0.1}.
  std::function<void(const nlohmann::json&, const std::string&)> visit;
  visit = [&](const nlohmann::json& obj, const std::string& prefix) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
      if (prefix.empty() && key.rfind("sagemaker_", 0) == 0) continue;
      // The image's entry point turns {"config": "job.yaml"} into --config and drops it.
      if (prefix.empty() && key == "config")
        throw InputError(path +
                         ": key 'config' names a job spec file, which sdp-train takes only as "
                         "--config FILE; the SageMaker image's `train` entry point "
                         "(scripts/sagemaker-entrypoint.sh) resolves it");
      if (it->is_object()) {
        visit(*it, key);
        continue;
      }
      std::string text = it->is_string() ? it->get<std::string>() : it->dump();
      apply_override(key + "=" + text, path);
    }
  };
  visit(doc, "");
}

JobSpec JobSpecLoader::finish() const {
  JobSpec spec = spec_;
  for (const JobSpecField& f : job_spec_schema()) {
    if (!f.string_ref) continue;
    std::string& value = f.string_ref(spec);
    value = expand_env_vars(value, sources_.at(f.path) + ": key '" + f.path + "'");
  }

  validate_job_spec(spec, sources_);
  return spec;
}

}  // namespace sdp
