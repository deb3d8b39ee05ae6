#include "config/job_spec_loader.hpp"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

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

namespace {

// The SageMaker DeepFM sample's hyperparameters (aws-samples deepfm-tensorflow-distributed-
// training-on-amazon-sagemaker, tf.app.flags) as job keys, so that its estimator's
// hyperparameters work unchanged. Returns the assignments, or none when `key` is not one.
std::vector<std::pair<std::string, std::string>> sample_hyperparameter(const std::string& key, const std::string& value,
                                                                       const std::string& path) {
  static const std::map<std::string, std::string> direct = {
      {"feature_size", "model.table_rows"}, {"field_size", "model.fields"},
      {"embedding_size", "model.embedding_size"}, {"l2_reg", "model.l2"},
      {"learning_rate", "optimizer.lr"}, {"batch_size", "data.batch_size"},
      {"num_epochs", "train.epochs"}, {"batch_norm", "model.batch_norm"},
      {"batch_norm_decay", "model.batch_norm_decay"}};
  if (auto it = direct.find(key); it != direct.end()) {
    std::string v = value;
    if (key == "batch_norm") v = (v == "True" || v == "true" || v == "1") ? "true" : (v == "False" || v == "false" || v == "0") ? "false" : v;
    return {{it->second, v}};
  }
  if (key == "deep_layers") return {{"model.hidden", "[" + value + "]"}};
  if (key == "dropout") {
    // The sample passes keep probabilities, one per layer; ours is one drop probability.
    std::vector<double> keeps;
    std::size_t start = 0;
    while (start <= value.size()) {
      const std::size_t comma = value.find(',', start);
      const std::string item = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      try {
        std::size_t used = 0;
        keeps.push_back(std::stod(item, &used));
        if (used != item.size()) throw std::invalid_argument(item);
      } catch (const std::exception&) {
        throw InputError(path + ": hyperparameter 'dropout': expected keep probabilities such as \"0.5,0.5,0.5\", got '" +
                         value + "'");
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    for (double k : keeps)
      if (k != keeps.front())
        throw InputError(path + ": hyperparameter 'dropout': '" + value +
                         "' keeps a different share per layer; sdp-train's model.dropout is one drop probability "
                         "for every hidden layer");
    if (keeps.front() <= 0 || keeps.front() > 1)
      throw InputError(path + ": hyperparameter 'dropout': keep probabilities are in (0, 1], got '" + value + "'");
    char text[32];
    std::snprintf(text, sizeof text, "%.12g", 1.0 - keeps.front());
    return {{"model.dropout", text}};
  }
  if (key == "optimizer") {
    if (value == "Adam") return {{"optimizer.name", "adam"}};
    if (value == "Adagrad") return {{"optimizer.name", "adagrad"}, {"optimizer.initial_accumulator", "1e-8"}};
    if (value == "Momentum") return {{"optimizer.name", "sgd"}, {"optimizer.momentum", "0.95"}};
    if (value == "GD") return {{"optimizer.name", "sgd"}, {"optimizer.momentum", "0"}};
    if (value == "ftrl") return {{"optimizer.name", "ftrl"}};
    throw InputError(path + ": hyperparameter 'optimizer': the DeepFM sample's choices are Adam, Adagrad, Momentum, "
                     "GD and ftrl, got '" + value + "'");
  }
  return {};
}

}  // namespace

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
      if (prefix.empty() && find_field(key) == nullptr) {
        // The SageMaker SDK json.dumps each value: "\"Adam\"" is Adam.
        const std::string plain = strip_json_string_quotes(text);
        const auto assignments = sample_hyperparameter(key, plain, path);
        if (!assignments.empty()) {
          std::string became;
          for (const auto& [job_key, value] : assignments) {
            apply_override(job_key + "=" + value, path + " (hyperparameter '" + key + "')");
            became += (became.empty() ? "" : ", ") + job_key + "=" + value;
          }
          spec_.source_notes.push_back("hyperparameter " + key + "=" + plain + " (the DeepFM sample's) -> " + became);
          continue;
        }
      }
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
