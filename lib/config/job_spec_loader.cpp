#include "config/job_spec_loader.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "config/did_you_mean.hpp"
#include "config/env_expand.hpp"
#include "config/json_file.hpp"
#include "core/error.hpp"

namespace sdp {

const std::vector<std::string>& known_model_names() {
  static const std::vector<std::string> names = {"mlp",      "lenet5",   "resnet20",
                                                 "resnet32", "resnet44", "resnet56",
                                                 "resnet18", "resnet34", "resnet50"};
  return names;
}

namespace {

// Thrown by a field's converter; the caller adds source and key.
struct BadValue {
  std::string what;
};

std::string node_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  if (node.IsNull()) return "";
  std::ostringstream out;
  out << YAML::Dump(node);
  std::string s = out.str();
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

template <typename T>
T convert_scalar(const YAML::Node& node, const char* expected) {
  if (!node.IsScalar()) throw BadValue{std::string("expected ") + expected};
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    throw BadValue{std::string("expected ") + expected + ", got '" + node.Scalar() + "'"};
  }
}

void convert(const YAML::Node& node, int& out) {
  auto v = convert_scalar<int64_t>(node, "an integer");
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    throw BadValue{"integer " + node.Scalar() + " is out of range"};
  out = static_cast<int>(v);
}
void convert(const YAML::Node& node, int64_t& out) { out = convert_scalar<int64_t>(node, "an integer"); }
void convert(const YAML::Node& node, uint64_t& out) {
  auto v = convert_scalar<int64_t>(node, "a non-negative integer");
  if (v < 0) throw BadValue{"expected a non-negative integer, got " + node.Scalar()};
  out = static_cast<uint64_t>(v);
}
void convert(const YAML::Node& node, double& out) {
  out = convert_scalar<double>(node, "a number");
  if (!std::isfinite(out)) throw BadValue{"expected a finite number, got '" + node.Scalar() + "'"};
}
void convert(const YAML::Node& node, bool& out) { out = convert_scalar<bool>(node, "true or false"); }
void convert(const YAML::Node& node, std::string& out) {
  if (node.IsNull()) {
    out.clear();
    return;
  }
  if (!node.IsScalar()) throw BadValue{"expected a string"};
  out = node.Scalar();
}
void convert(const YAML::Node& node, std::vector<int>& out) {
  std::vector<int> values;
  if (node.IsSequence()) {
    for (const auto& item : node) {
      int v;
      try {
        convert(item, v);
      } catch (const BadValue&) {
        throw BadValue{"expected a list of integers, got '" + node_text(node) + "'"};
      }
      values.push_back(v);
    }
  } else if (node.IsScalar()) {  // a single value is a one-element list
    int v;
    try {
      convert(node, v);
    } catch (const BadValue&) {
      throw BadValue{"expected a list of integers, got '" + node.Scalar() + "'"};
    }
    values.push_back(v);
  } else if (!node.IsNull()) {
    throw BadValue{"expected a list of integers"};
  }
  out = std::move(values);
}

template <typename T>
void emit_value(YAML::Emitter& out, const T& v) {
  out << v;
}
void emit_value(YAML::Emitter& out, const std::string& v) { out << YAML::DoubleQuoted << v; }
void emit_value(YAML::Emitter& out, const std::vector<int>& v) {
  out << YAML::Flow << YAML::BeginSeq;
  for (int x : v) out << x;
  out << YAML::EndSeq;
}
void emit_value(YAML::Emitter& out, const double& v) {
  std::ostringstream s;
  s.precision(10);
  s << v;
  out << s.str();
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string s;
  for (std::size_t i = 0; i < items.size(); ++i) s += (i ? sep : "") + items[i];
  return s;
}

struct Field {
  std::string path;
  bool is_string = false;
  std::vector<std::string> choices;  // non-empty: the value must be one of these
  std::function<void(JobSpec&, const YAML::Node&)> assign;
  std::function<void(YAML::Emitter&, const JobSpec&)> emit;
  std::function<std::string&(JobSpec&)> string_ref;  // for ${VAR} expansion
};

template <typename Accessor>
Field make_field(const std::string& path, Accessor access, std::vector<std::string> choices = {}) {
  using T = std::decay_t<decltype(access(std::declval<JobSpec&>()))>;
  Field f;
  f.path = path;
  f.is_string = std::is_same_v<T, std::string>;
  f.choices = choices;
  f.assign = [access, choices](JobSpec& spec, const YAML::Node& node) {
    T value{};
    convert(node, value);
    if constexpr (std::is_same_v<T, std::string>) {
      if (!choices.empty() && std::find(choices.begin(), choices.end(), value) == choices.end())
        throw BadValue{unknown_value_message(value, choices)};
    }
    access(spec) = std::move(value);
  };
  f.emit = [access](YAML::Emitter& out, const JobSpec& spec) {
    emit_value(out, access(const_cast<JobSpec&>(spec)));
  };
  if constexpr (std::is_same_v<T, std::string>) {
    f.string_ref = [access](JobSpec& spec) -> std::string& { return access(spec); };
  }
  return f;
}

#define SDP_FIELD(path, member, ...) \
  make_field(path, [](JobSpec& s) -> auto& { return s.member; }, ##__VA_ARGS__)

const std::vector<Field>& schema() {
  static const std::vector<Field> fields = [] {
    std::vector<Field> f;
    f.push_back(SDP_FIELD("name", name));
    f.push_back(SDP_FIELD("seed", seed));
    f.push_back(SDP_FIELD("device", device, {"auto", "cpu", "cuda"}));
    f.push_back(SDP_FIELD("precision", precision, {"fp32", "amp-fp16", "amp-bf16"}));
    f.push_back(SDP_FIELD("threads", threads));
    f.push_back(SDP_FIELD("model.name", model.name, known_model_names()));
    f.push_back(SDP_FIELD("model.num_classes", model.num_classes));
    f.push_back(SDP_FIELD("model.hidden", model.hidden));
    f.push_back(SDP_FIELD("model.dropout", model.dropout));
    f.push_back(SDP_FIELD("data.format", data.format, {"mnist", "cifar10", "synthetic"}));
    f.push_back(SDP_FIELD("data.train", data.train));
    f.push_back(SDP_FIELD("data.test", data.test));
    f.push_back(SDP_FIELD("data.batch_size", data.batch_size));
    f.push_back(SDP_FIELD("data.shard", data.shard, {"rank", "host"}));
    f.push_back(SDP_FIELD("data.prefetch", data.prefetch));
    f.push_back(SDP_FIELD("data.augment", data.augment, {"auto", "none", "crop-flip"}));
    f.push_back(SDP_FIELD("data.synthetic.train_samples", data.synthetic.train_samples));
    f.push_back(SDP_FIELD("data.synthetic.test_samples", data.synthetic.test_samples));
    f.push_back(SDP_FIELD("data.synthetic.channels", data.synthetic.channels));
    f.push_back(SDP_FIELD("data.synthetic.height", data.synthetic.height));
    f.push_back(SDP_FIELD("data.synthetic.width", data.synthetic.width));
    f.push_back(SDP_FIELD("data.synthetic.noise", data.synthetic.noise));
    f.push_back(SDP_FIELD("train.epochs", train.epochs));
    f.push_back(SDP_FIELD("train.max_steps", train.max_steps));
    f.push_back(SDP_FIELD("train.log_every", train.log_every));
    f.push_back(SDP_FIELD("train.eval_every_epochs", train.eval_every_epochs));
    f.push_back(SDP_FIELD("optimizer.name", optimizer.name, {"sgd", "adam", "adamw"}));
    f.push_back(SDP_FIELD("optimizer.lr", optimizer.lr));
    f.push_back(SDP_FIELD("optimizer.momentum", optimizer.momentum));
    f.push_back(SDP_FIELD("optimizer.nesterov", optimizer.nesterov));
    f.push_back(SDP_FIELD("optimizer.weight_decay", optimizer.weight_decay));
    f.push_back(SDP_FIELD("optimizer.beta1", optimizer.beta1));
    f.push_back(SDP_FIELD("optimizer.beta2", optimizer.beta2));
    f.push_back(SDP_FIELD("optimizer.eps", optimizer.eps));
    f.push_back(SDP_FIELD("optimizer.lr_scaling", optimizer.lr_scaling));
    f.push_back(SDP_FIELD("optimizer.warmup_epochs", optimizer.warmup_epochs));
    f.push_back(SDP_FIELD("optimizer.schedule", optimizer.schedule, {"constant", "step", "cosine"}));
    f.push_back(SDP_FIELD("optimizer.milestones", optimizer.milestones));
    f.push_back(SDP_FIELD("optimizer.gamma", optimizer.gamma));
    f.push_back(SDP_FIELD("optimizer.min_lr", optimizer.min_lr));
    f.push_back(SDP_FIELD("distributed.backend", distributed.backend, {"auto", "mpi", "nccl"}));
    f.push_back(SDP_FIELD("distributed.allreduce", distributed.allreduce,
                          {"auto", "flat", "ring", "hierarchical"}));
    f.push_back(SDP_FIELD("distributed.bucket_mb", distributed.bucket_mb));
    f.push_back(SDP_FIELD("distributed.compression", distributed.compression, {"none", "fp16", "bf16"}));
    {
      // "auto" or a positive integer; stored as 0 for auto.
      Field rpn = SDP_FIELD("distributed.ranks_per_node", distributed.ranks_per_node);
      auto assign_int = rpn.assign;
      rpn.assign = [assign_int](JobSpec& spec, const YAML::Node& node) {
        if (node.IsScalar() && node.Scalar() == "auto") {
          spec.distributed.ranks_per_node = 0;
          return;
        }
        try {
          assign_int(spec, node);
        } catch (const BadValue&) {
          throw BadValue{"expected 'auto' or a positive integer, got '" + node_text(node) + "'"};
        }
      };
      rpn.emit = [](YAML::Emitter& out, const JobSpec& spec) {
        if (spec.distributed.ranks_per_node == 0)
          out << "auto";
        else
          out << spec.distributed.ranks_per_node;
      };
      f.push_back(rpn);
    }
    f.push_back(SDP_FIELD("distributed.timeout_s", distributed.timeout_s));
    f.push_back(SDP_FIELD("distributed.stall_warning_s", distributed.stall_warning_s));
    f.push_back(SDP_FIELD("distributed.check_every_steps", distributed.check_every_steps));
    f.push_back(SDP_FIELD("checkpoint.dir", checkpoint.dir));
    f.push_back(SDP_FIELD("checkpoint.every_steps", checkpoint.every_steps));
    f.push_back(SDP_FIELD("checkpoint.keep_last", checkpoint.keep_last));
    f.push_back(SDP_FIELD("checkpoint.resume", checkpoint.resume));
    f.push_back(SDP_FIELD("output.model_dir", output.model_dir));
    f.push_back(SDP_FIELD("output.metrics", output.metrics));
    f.push_back(SDP_FIELD("output.timeline", output.timeline));
    return f;
  }();
  return fields;
}

const Field* find_field(const std::string& path) {
  for (const Field& f : schema())
    if (f.path == path) return &f;
  return nullptr;
}

bool is_section(const std::string& path) {
  for (const Field& f : schema())
    if (f.path.size() > path.size() && f.path.compare(0, path.size(), path) == 0 &&
        f.path[path.size()] == '.')
      return true;
  return false;
}

std::string unknown_key_message(const std::string& path) {
  std::string msg = "unknown key '" + path + "'";
  auto close = closest_names(path, JobSpecLoader::key_paths(), 3);
  if (!close.empty()) msg += " (did you mean '" + join(close, "', '") + "'?)";
  return msg;
}

// Non-string values may use ${VAR} too (e.g. epochs: ${EPOCHS:-5}); they are expanded
// before conversion. String values are expanded in finish(), defaults included.
YAML::Node expand_scalar_if_needed(const Field& field, const YAML::Node& node,
                                   const std::string& where) {
  if (field.is_string || !node.IsScalar() || node.Scalar().find("${") == std::string::npos)
    return node;
  return YAML::Node(expand_env_vars(node.Scalar(), where));
}

}  // namespace

JobSpecLoader::JobSpecLoader() {
  for (const Field& f : schema()) sources_[f.path] = "default";
}

std::vector<std::string> JobSpecLoader::key_paths() {
  std::vector<std::string> paths;
  for (const Field& f : schema()) paths.push_back(f.path);
  return paths;
}

void JobSpecLoader::apply_yaml_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("config file '" + path + "' not found or not readable");
  std::stringstream buffer;
  buffer << in.rdbuf();
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
      const std::string key = item.first.as<std::string>();
      const std::string path = prefix.empty() ? key : prefix + "." + key;
      const std::string where = source + ":" + std::to_string(item.first.Mark().line + 1);
      if (!seen.insert(key).second)
        throw InputError(where + ": key '" + path + "' appears twice");
      if (const Field* field = find_field(path)) {
        try {
          field->assign(spec_, expand_scalar_if_needed(*field, item.second, where + ": key '" + path + "'"));
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
  const Field* field = find_field(path);
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
    throw InputError(path + ": expected a JSON object of hyperparameters {\"key.path\": \"value\"}");
  // Nested objects are flattened with dots: {"optimizer": {"lr": 0.1}} == {"optimizer.lr": 0.1}.
  std::function<void(const nlohmann::json&, const std::string&)> visit;
  visit = [&](const nlohmann::json& obj, const std::string& prefix) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
      if (prefix.empty() && key.rfind("sagemaker_", 0) == 0) continue;
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

namespace {

class RangeChecker {
 public:
  explicit RangeChecker(const std::map<std::string, std::string>& sources) : sources_(sources) {}
  void require(bool ok, const std::string& path, const std::string& what) const {
    if (ok) return;
    auto it = sources_.find(path);
    std::string where = it == sources_.end() ? "job spec" : it->second;
    if (where == "default") where = "job spec (default value)";
    throw InputError(where + ": key '" + path + "': " + what);
  }

 private:
  const std::map<std::string, std::string>& sources_;
};

bool is_positive_number(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  return end != text.c_str() && *end == '\0' && std::isfinite(v) && v > 0;
}

}  // namespace

JobSpec JobSpecLoader::finish() const {
  JobSpec spec = spec_;
  for (const Field& f : schema()) {
    if (!f.string_ref) continue;
    std::string& value = f.string_ref(spec);
    value = expand_env_vars(value, sources_.at(f.path) + ": key '" + f.path + "'");
  }

  RangeChecker check(sources_);
  check.require(!spec.name.empty(), "name", "must not be empty");
  check.require(spec.threads >= 0, "threads", "must be >= 0 (0 = cores / ranks per node)");
  check.require(spec.precision == "fp32" || spec.device != "cpu", "precision",
                spec.precision + " needs device: cuda (the CPU backend trains in fp32)");

  const ModelSpec& m = spec.model;
  check.require(m.num_classes >= 2, "model.num_classes", "must be >= 2, got " + std::to_string(m.num_classes));
  check.require(!m.hidden.empty(), "model.hidden", "must list at least one layer width");
  for (int w : m.hidden) check.require(w > 0, "model.hidden", "layer widths must be positive");
  check.require(m.dropout >= 0 && m.dropout < 1, "model.dropout", "must be in [0, 1)");

  const DataSpec& d = spec.data;
  check.require(d.batch_size > 0, "data.batch_size",
                "must be a positive integer, got " + std::to_string(d.batch_size));
  check.require(d.prefetch >= 0, "data.prefetch", "must be >= 0");
  if (d.format != "synthetic") {
    check.require(!d.train.empty(), "data.train", "must name the training data directory");
    check.require(!d.test.empty(), "data.test", "must name the test data directory");
  }
  check.require(d.synthetic.train_samples > 0, "data.synthetic.train_samples", "must be positive");
  check.require(d.synthetic.test_samples > 0, "data.synthetic.test_samples", "must be positive");
  check.require(d.synthetic.channels > 0, "data.synthetic.channels", "must be positive");
  check.require(d.synthetic.height > 0, "data.synthetic.height", "must be positive");
  check.require(d.synthetic.width > 0, "data.synthetic.width", "must be positive");
  check.require(d.synthetic.noise >= 0, "data.synthetic.noise", "must be >= 0");

  const TrainSpec& t = spec.train;
  check.require(t.epochs >= 0, "train.epochs", "must be >= 0");
  check.require(t.max_steps >= 0, "train.max_steps", "must be >= 0 (0 = no limit)");
  check.require(t.epochs > 0 || t.max_steps > 0, "train.epochs",
                "train.epochs and train.max_steps are both 0: there is nothing to train");
  check.require(t.log_every > 0, "train.log_every", "must be a positive number of steps");
  check.require(t.eval_every_epochs >= 0, "train.eval_every_epochs", "must be >= 0");

  const OptimizerSpec& o = spec.optimizer;
  check.require(o.lr > 0, "optimizer.lr", "must be > 0, got " + std::to_string(o.lr));
  check.require(o.momentum >= 0 && o.momentum < 1, "optimizer.momentum", "must be in [0, 1)");
  check.require(!o.nesterov || o.momentum > 0, "optimizer.nesterov", "needs optimizer.momentum > 0");
  check.require(o.weight_decay >= 0, "optimizer.weight_decay", "must be >= 0");
  check.require(o.beta1 >= 0 && o.beta1 < 1, "optimizer.beta1", "must be in [0, 1)");
  check.require(o.beta2 >= 0 && o.beta2 < 1, "optimizer.beta2", "must be in [0, 1)");
  check.require(o.eps > 0, "optimizer.eps", "must be > 0");
  check.require(o.lr_scaling == "linear" || o.lr_scaling == "sqrt" || o.lr_scaling == "none" ||
                    is_positive_number(o.lr_scaling),
                "optimizer.lr_scaling",
                "unknown value '" + o.lr_scaling + "' (expected linear, sqrt, none or a positive factor)");
  check.require(o.warmup_epochs >= 0, "optimizer.warmup_epochs", "must be >= 0");
  for (std::size_t i = 0; i < o.milestones.size(); ++i)
    check.require(o.milestones[i] > 0 && (i == 0 || o.milestones[i] > o.milestones[i - 1]),
                  "optimizer.milestones", "must be increasing positive epoch numbers");
  check.require(o.schedule != "step" || !o.milestones.empty(), "optimizer.schedule",
                "step needs at least one milestone epoch in optimizer.milestones");
  check.require(o.gamma > 0 && o.gamma <= 1, "optimizer.gamma", "must be in (0, 1]");
  check.require(o.min_lr >= 0 && o.min_lr < o.lr, "optimizer.min_lr", "must be in [0, optimizer.lr)");

  const DistributedSpec& ds = spec.distributed;
  check.require(ds.bucket_mb >= 0, "distributed.bucket_mb", "must be >= 0 (0 = one bucket)");
  check.require(ds.ranks_per_node >= 0, "distributed.ranks_per_node", "must be 'auto' or a positive integer");
  check.require(ds.timeout_s > 0, "distributed.timeout_s", "must be > 0 seconds");
  check.require(ds.stall_warning_s > 0, "distributed.stall_warning_s", "must be > 0 seconds");
  check.require(ds.check_every_steps >= 0, "distributed.check_every_steps", "must be >= 0 (0 = off)");

  const CheckpointSpec& c = spec.checkpoint;
  check.require(c.every_steps >= 0, "checkpoint.every_steps", "must be >= 0 (0 = only at the end)");
  check.require(c.keep_last >= 1, "checkpoint.keep_last", "must be >= 1");
  check.require(!c.resume.empty(), "checkpoint.resume", "must be auto, never or a checkpoint path");
  return spec;
}

std::string job_spec_to_yaml(const JobSpec& spec) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::vector<std::string> open;  // section names currently open
  for (const Field& f : schema()) {
    std::vector<std::string> parts;
    std::stringstream ss(f.path);
    for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
    std::size_t common = 0;
    while (common < open.size() && common + 1 < parts.size() && open[common] == parts[common])
      ++common;
    while (open.size() > common) {
      out << YAML::EndMap;
      open.pop_back();
    }
    for (std::size_t i = common; i + 1 < parts.size(); ++i) {
      out << YAML::Key << parts[i] << YAML::Value << YAML::BeginMap;
      open.push_back(parts[i]);
    }
    out << YAML::Key << parts.back() << YAML::Value;
    f.emit(out, spec);
  }
  while (!open.empty()) {
    out << YAML::EndMap;
    open.pop_back();
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace sdp
