#include "config/job_spec_schema.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <type_traits>

#include "config/did_you_mean.hpp"
#include "config/model_names.hpp"
#include "core/error.hpp"

namespace sdp {

namespace {

// The accepted model names as the schema's choice list (model.name stays a string: models/
// looks builders up by name).
std::vector<std::string> model_names() {
  std::vector<std::string> names(kModelNames.begin(), kModelNames.end());
  names.insert(names.end(), kCtrModelNames.begin(), kCtrModelNames.end());
  return names;
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string s;
  for (std::size_t i = 0; i < items.size(); ++i) s += (i ? sep : "") + items[i];
  return s;
}

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
void convert(const YAML::Node& node, int64_t& out) {
  out = convert_scalar<int64_t>(node, "an integer");
}
void convert(const YAML::Node& node, uint64_t& out) {
  auto v = convert_scalar<int64_t>(node, "a non-negative integer");
  if (v < 0) throw BadValue{"expected a non-negative integer, got " + node.Scalar()};
  out = static_cast<uint64_t>(v);
}
void convert(const YAML::Node& node, double& out) {
  out = convert_scalar<double>(node, "a number");
  if (!std::isfinite(out)) throw BadValue{"expected a finite number, got '" + node.Scalar() + "'"};
}
void convert(const YAML::Node& node, bool& out) {
  out = convert_scalar<bool>(node, "true or false");
}
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

// A word of a choice key (choices.hpp). Null reads as "", so `device:` alone is reported
// as an unknown value like any other.
template <typename E, typename = std::enable_if_t<std::is_enum_v<E>>>
void convert(const YAML::Node& node, E& out) {
  if (!node.IsNull() && !node.IsScalar())
    throw BadValue{"expected one of: " + join(choice_names<E>(), ", ") + ", got '" +
                   node_text(node) + "'"};
  try {
    out = parse_choice<E>(node.IsNull() ? std::string() : node.Scalar());
  } catch (const InputError& e) {
    throw BadValue{e.what()};
  }
}
// linear | sqrt | none | a positive number | {factor: <positive number>}
void convert(const YAML::Node& node, LrScaling& out) {
  if (node.IsMap()) {
    const YAML::Node factor = node["factor"];
    if (node.size() != 1 || !factor)
      throw BadValue{"expected linear, sqrt, none, a positive factor or {factor: x}, got '" +
                     node_text(node) + "'"};
    double value = 0;
    convert(factor, value);
    if (!(value > 0)) throw BadValue{"factor must be > 0, got " + factor.Scalar()};
    out = LrScaling::explicit_factor(value);
    return;
  }
  if (!node.IsNull() && !node.IsScalar())
    throw BadValue{"expected linear, sqrt, none, a positive factor or {factor: x}, got '" +
                   node_text(node) + "'"};
  try {
    out = parse_lr_scaling(node.IsNull() ? std::string() : node.Scalar());
  } catch (const InputError& e) {
    throw BadValue{e.what()};
  }
}

template <typename T, typename = std::enable_if_t<!std::is_enum_v<T>>>
void emit_value(YAML::Emitter& out, const T& v) {
  out << v;
}
// Choice words are written quoted, as when these keys were strings, so the printed spec
// keeps its form.
template <typename E, typename = std::enable_if_t<std::is_enum_v<E>>>
void emit_value(YAML::Emitter& out, E v) {
  out << YAML::DoubleQuoted << to_string(v);
}
void emit_value(YAML::Emitter& out, const LrScaling& v) {
  out << YAML::DoubleQuoted << to_string(v);
}
void emit_value(YAML::Emitter& out, const std::string& v) {
  out << YAML::DoubleQuoted << v;
}
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

template <typename Accessor>
JobSpecField make_field(const std::string& path, Accessor access,
                        std::vector<std::string> choices = {}) {
  using T = std::decay_t<decltype(access(std::declval<JobSpec&>()))>;
  JobSpecField f;
  f.path = path;
  f.is_string = std::is_same_v<T, std::string>;
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
  make_field(                        \
      path, [](JobSpec & s) -> auto& { return s.member; }, ##__VA_ARGS__)

}  // namespace

const std::vector<JobSpecField>& job_spec_schema() {
  static const std::vector<JobSpecField> fields = [] {
    std::vector<JobSpecField> f;
    f.push_back(SDP_FIELD("name", name));
    f.push_back(SDP_FIELD("seed", seed));
    f.push_back(SDP_FIELD("device", device));
    f.push_back(SDP_FIELD("precision", precision));
    f.push_back(SDP_FIELD("threads", threads));
    f.push_back(SDP_FIELD("model.name", model.name, model_names()));
    f.push_back(SDP_FIELD("model.num_classes", model.num_classes));
    f.push_back(SDP_FIELD("model.hidden", model.hidden));
    f.push_back(SDP_FIELD("model.dropout", model.dropout));
    f.push_back(SDP_FIELD("model.zero_init_residual", model.zero_init_residual));
    f.push_back(SDP_FIELD("model.fields", model.fields));
    f.push_back(SDP_FIELD("model.table_rows", model.table_rows));
    f.push_back(SDP_FIELD("model.embedding_size", model.embedding_size));
    f.push_back(SDP_FIELD("model.l2", model.l2));
    f.push_back(SDP_FIELD("model.batch_norm", model.batch_norm));
    f.push_back(SDP_FIELD("model.batch_norm_decay", model.batch_norm_decay));
    f.push_back(SDP_FIELD("model.embedding_sharding", model.embedding_sharding, {"replicated", "rows"}));
    f.push_back(SDP_FIELD("model.memory_format", model.memory_format, {"auto", "channels_last", "nchw"}));
    f.push_back(SDP_FIELD("model.memory_plan", model.memory_plan, {"auto", "shared", "lean", "per_layer"}));
    f.push_back(SDP_FIELD("model.batchnorm", model.batchnorm, {"auto", "separate", "folded", "folded_inner"}));
    f.push_back(SDP_FIELD("model.grad_sum", model.grad_sum, {"auto", "separate", "fused"}));
    f.push_back(SDP_FIELD("data.format", data.format));
    f.push_back(SDP_FIELD("data.train", data.train));
    f.push_back(SDP_FIELD("data.test", data.test));
    f.push_back(SDP_FIELD("data.batch_size", data.batch_size));
    f.push_back(SDP_FIELD("data.shard", data.shard));
    f.push_back(SDP_FIELD("data.prefetch", data.prefetch));
    f.push_back(SDP_FIELD("data.augment", data.augment));
    f.push_back(SDP_FIELD("data.image_size", data.image_size));
    f.push_back(SDP_FIELD("data.resize", data.resize));
    f.push_back(SDP_FIELD("data.workers", data.workers));
    f.push_back(SDP_FIELD("data.decode", data.decode));
    f.push_back(SDP_FIELD("data.normalize_on", data.normalize_on, {"auto", "cpu", "gpu"}));
    f.push_back(SDP_FIELD("data.decode_roi", data.decode_roi, {"auto", "on", "off"}));
    f.push_back(SDP_FIELD("data.nvjpeg_backend", data.nvjpeg_backend,
                          {"auto", "hardware", "gpu_hybrid", "nvjpeg_default"}));
    f.push_back(SDP_FIELD("data.batch_type", data.batch_type, {"auto", "f32", "compute"}));
    f.push_back(SDP_FIELD("data.normalize", data.normalize, {"imagenet", "cifar10"}));
    f.push_back(SDP_FIELD("data.image_key", data.image_key));
    f.push_back(SDP_FIELD("data.label_key", data.label_key));
    f.push_back(SDP_FIELD("data.label_offset", data.label_offset));
    f.push_back(SDP_FIELD("data.on_bad_record", data.on_bad_record, {"abort", "skip"}));
    f.push_back(SDP_FIELD("data.id_overflow", data.id_overflow, {"error", "hash"}));
    f.push_back(SDP_FIELD("data.load", data.load, {"auto", "memory", "stream"}));
    f.push_back(SDP_FIELD("data.ids_key", data.ids_key));
    f.push_back(SDP_FIELD("data.values_key", data.values_key));
    f.push_back(SDP_FIELD("data.shuffle_buffer", data.shuffle_buffer));
    f.push_back(SDP_FIELD("data.samples_per_epoch", data.samples_per_epoch));
    f.push_back(SDP_FIELD("data.synthetic.train_samples", data.synthetic.train_samples));
    f.push_back(SDP_FIELD("data.synthetic.test_samples", data.synthetic.test_samples));
    f.push_back(SDP_FIELD("data.synthetic.channels", data.synthetic.channels));
    f.push_back(SDP_FIELD("data.synthetic.height", data.synthetic.height));
    f.push_back(SDP_FIELD("data.synthetic.width", data.synthetic.width));
    f.push_back(SDP_FIELD("data.synthetic.noise", data.synthetic.noise));
    f.push_back(SDP_FIELD("data.synthetic.zipf", data.synthetic.zipf));
    f.push_back(SDP_FIELD("train.epochs", train.epochs));
    f.push_back(SDP_FIELD("train.max_steps", train.max_steps));
    f.push_back(SDP_FIELD("train.accumulate_steps", train.accumulate_steps));
    f.push_back(SDP_FIELD("train.label_smoothing", train.label_smoothing));
    f.push_back(SDP_FIELD("train.log_every", train.log_every));
    f.push_back(SDP_FIELD("train.eval_every_epochs", train.eval_every_epochs));
    f.push_back(SDP_FIELD("train.on_nonfinite", train.on_nonfinite));
    f.push_back(SDP_FIELD("train.on_divergence", train.on_divergence));
    f.push_back(SDP_FIELD("train.deterministic", train.deterministic));
    f.push_back(SDP_FIELD("train.conv_algorithms", train.conv_algorithms, {"heuristic", "measured"}));
    f.push_back(SDP_FIELD("train.cudnn_workspace_mb", train.cudnn_workspace_mb));
    f.push_back(SDP_FIELD("train.loss_read", train.loss_read, {"auto", "forward", "step_end"}));
    f.push_back(SDP_FIELD("train.cuda_graphs", train.cuda_graphs, {"auto", "off", "on"}));
    f.push_back(SDP_FIELD("optimizer.name", optimizer.name));
    f.push_back(SDP_FIELD("optimizer.lr", optimizer.lr));
    f.push_back(SDP_FIELD("optimizer.reference_batch", optimizer.reference_batch));
    f.push_back(SDP_FIELD("optimizer.momentum", optimizer.momentum));
    f.push_back(SDP_FIELD("optimizer.nesterov", optimizer.nesterov));
    f.push_back(SDP_FIELD("optimizer.weight_decay", optimizer.weight_decay));
    f.push_back(SDP_FIELD("optimizer.beta1", optimizer.beta1));
    f.push_back(SDP_FIELD("optimizer.beta2", optimizer.beta2));
    f.push_back(SDP_FIELD("optimizer.eps", optimizer.eps));
    f.push_back(SDP_FIELD("optimizer.trust_coefficient", optimizer.trust_coefficient));
    f.push_back(SDP_FIELD("optimizer.initial_accumulator", optimizer.initial_accumulator));
    f.push_back(SDP_FIELD("optimizer.l1", optimizer.l1));
    f.push_back(SDP_FIELD("optimizer.lr_scaling", optimizer.lr_scaling));
    f.push_back(SDP_FIELD("optimizer.warmup_epochs", optimizer.warmup_epochs));
    f.push_back(SDP_FIELD("optimizer.warmup_steps", optimizer.warmup_steps));
    f.push_back(SDP_FIELD("optimizer.schedule", optimizer.schedule));
    f.push_back(SDP_FIELD("optimizer.milestones", optimizer.milestones));
    f.push_back(SDP_FIELD("optimizer.gamma", optimizer.gamma));
    f.push_back(SDP_FIELD("optimizer.min_lr", optimizer.min_lr));
    f.push_back(SDP_FIELD("optimizer.capturable", optimizer.capturable, {"auto", "off", "on"}));
    f.push_back(SDP_FIELD("distributed.backend", distributed.backend));
    f.push_back(SDP_FIELD("distributed.allreduce", distributed.allreduce));
    {
      // "auto" or a size in MB; stored as kAutoBucketMb for auto.
      JobSpecField bucket = SDP_FIELD("distributed.bucket_mb", distributed.bucket_mb);
      auto assign_number = bucket.assign;
      bucket.assign = [assign_number](JobSpec& spec, const YAML::Node& node) {
        if (node.IsScalar() && node.Scalar() == "auto") {
          spec.distributed.bucket_mb = kAutoBucketMb;
          return;
        }
        try {
          assign_number(spec, node);
        } catch (const BadValue&) {
          throw BadValue{"expected 'auto' or a size in MB, got '" + node_text(node) + "'"};
        }
      };
      bucket.emit = [](YAML::Emitter& out, const JobSpec& spec) {
        if (spec.distributed.bucket_mb == kAutoBucketMb)
          out << "auto";
        else
          out << spec.distributed.bucket_mb;
      };
      f.push_back(bucket);
    }
    f.push_back(SDP_FIELD("distributed.compression", distributed.compression));
    {
      // "auto" or a positive integer; stored as 0 for auto.
      JobSpecField rpn = SDP_FIELD("distributed.ranks_per_node", distributed.ranks_per_node);
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
    f.push_back(SDP_FIELD("distributed.embedding_exchange", distributed.embedding_exchange, {"auto", "sparse", "dense"}));
    f.push_back(SDP_FIELD("distributed.share_gpus", distributed.share_gpus));
    f.push_back(SDP_FIELD("distributed.inter_node", distributed.inter_node));
    f.push_back(SDP_FIELD("distributed.stream_ordered", distributed.stream_ordered, {"auto", "off", "on"}));
    f.push_back(SDP_FIELD("distributed.calibration", distributed.calibration));
    f.push_back(SDP_FIELD("checkpoint.dir", checkpoint.dir));
    f.push_back(SDP_FIELD("checkpoint.every_steps", checkpoint.every_steps));
    f.push_back(SDP_FIELD("checkpoint.keep_last", checkpoint.keep_last));
    f.push_back(SDP_FIELD("checkpoint.resume", checkpoint.resume));
    f.push_back(SDP_FIELD("numerics.flush_denormals", numerics.flush_denormals));
    f.push_back(SDP_FIELD("output.model_dir", output.model_dir));
    f.push_back(SDP_FIELD("output.metrics", output.metrics));
    f.push_back(SDP_FIELD("output.timeline", output.timeline));
    f.push_back(SDP_FIELD("output.timeline_layers", output.timeline_layers));
    f.push_back(SDP_FIELD("output.tensorboard", output.tensorboard));
    f.push_back(SDP_FIELD("output.progress", output.progress));
    return f;
  }();
  return fields;
}

const JobSpecField* find_field(const std::string& path) {
  for (const JobSpecField& f : job_spec_schema())
    if (f.path == path) return &f;
  return nullptr;
}

bool is_section(const std::string& path) {
  for (const JobSpecField& f : job_spec_schema())
    if (f.path.size() > path.size() && f.path.compare(0, path.size(), path) == 0 &&
        f.path[path.size()] == '.')
      return true;
  return false;
}

std::string unknown_key_message(const std::string& path) {
  std::string msg = "unknown key '" + path + "'";
  std::vector<std::string> paths;
  for (const JobSpecField& f : job_spec_schema()) paths.push_back(f.path);
  auto close = closest_names(path, paths, 3);
  if (!close.empty()) msg += " (did you mean '" + join(close, "', '") + "'?)";
  return msg;
}

}  // namespace sdp
