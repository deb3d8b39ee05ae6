#include "config/choices.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "config/did_you_mean.hpp"
#include "core/error.hpp"

namespace sdp {

namespace {

template <typename E>
using Table = std::vector<std::pair<E, const char*>>;

template <typename E>
struct Spelling;  // Spelling<E>::table(): every value of E and its word, in documentation order

#define SDP_SPELLING(E, ...)                       \
  template <>                                      \
  struct Spelling<E> {                             \
    static const Table<E>& table() {               \
      static const Table<E> entries = __VA_ARGS__; \
      return entries;                              \
    }                                              \
  }

SDP_SPELLING(DevicePreference, {{DevicePreference::kAuto, "auto"},
                                {DevicePreference::kCpu, "cpu"},
                                {DevicePreference::kCuda, "cuda"}});
SDP_SPELLING(Precision, {{Precision::kFp32, "fp32"},
                         {Precision::kAmpFp16, "amp-fp16"},
                         {Precision::kAmpBf16, "amp-bf16"},
                         {Precision::kTf32, "tf32"}});
SDP_SPELLING(DataFormat, {{DataFormat::kMnist, "mnist"},
                          {DataFormat::kCifar10, "cifar10"},
                          {DataFormat::kSynthetic, "synthetic"},
                          {DataFormat::kTfrecord, "tfrecord"},
                          {DataFormat::kImageFolder, "image-folder"},
                          {DataFormat::kTarShards, "tar-shards"},
                          {DataFormat::kLibsvm, "libsvm"}});
SDP_SPELLING(DataShard, {{DataShard::kAuto, "auto"}, {DataShard::kRank, "rank"}, {DataShard::kHost, "host"}});
SDP_SPELLING(Augmentation, {{Augmentation::kAuto, "auto"},
                            {Augmentation::kNone, "none"},
                            {Augmentation::kCropFlip, "crop-flip"},
                            {Augmentation::kFlip, "flip"}});
SDP_SPELLING(OptimizerKind, {{OptimizerKind::kSgd, "sgd"},
                             {OptimizerKind::kAdam, "adam"},
                             {OptimizerKind::kAdamW, "adamw"},
                             {OptimizerKind::kLars, "lars"},
                             {OptimizerKind::kLamb, "lamb"},
                             {OptimizerKind::kAdagrad, "adagrad"},
                             {OptimizerKind::kFtrl, "ftrl"}});
SDP_SPELLING(ScheduleKind, {{ScheduleKind::kConstant, "constant"},
                            {ScheduleKind::kStep, "step"},
                            {ScheduleKind::kCosine, "cosine"},
                            {ScheduleKind::kLinear, "linear"}});
SDP_SPELLING(CommBackend, {{CommBackend::kAuto, "auto"},
                           {CommBackend::kMpi, "mpi"},
                           {CommBackend::kNccl, "nccl"}});
SDP_SPELLING(AllreduceKind, {{AllreduceKind::kAuto, "auto"},
                             {AllreduceKind::kFlat, "flat"},
                             {AllreduceKind::kRing, "ring"},
                             {AllreduceKind::kHierarchical, "hierarchical"}});
SDP_SPELLING(Compression, {{Compression::kAuto, "auto"},
                           {Compression::kNone, "none"},
                           {Compression::kFp16, "fp16"},
                           {Compression::kBf16, "bf16"}});
SDP_SPELLING(InterNode, {{InterNode::kAuto, "auto"}, {InterNode::kNccl, "nccl"}, {InterNode::kHost, "host"}});
SDP_SPELLING(DecodeChoice, {{DecodeChoice::kAuto, "auto"}, {DecodeChoice::kCpu, "cpu"}, {DecodeChoice::kGpu, "gpu"}});
SDP_SPELLING(OnNonfinite, {{OnNonfinite::kAbort, "abort"}, {OnNonfinite::kSkip, "skip"}});
SDP_SPELLING(OnDivergence, {{OnDivergence::kWarn, "warn"}, {OnDivergence::kAbort, "abort"}});
SDP_SPELLING(ProgressMode, {{ProgressMode::kAuto, "auto"},
                            {ProgressMode::kBar, "bar"},
                            {ProgressMode::kLines, "lines"}});

#undef SDP_SPELLING

template <typename E>
std::string name_of(E value) {
  for (const auto& [v, name] : Spelling<E>::table())
    if (v == value) return name;
  return "?";  // unreachable while every enumerator is in its table (tested)
}

}  // namespace

template <typename E>
const std::vector<std::string>& choice_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& entry : Spelling<E>::table()) out.push_back(entry.second);
    return out;
  }();
  return names;
}

template <typename E>
E parse_choice(const std::string& text) {
  for (const auto& [value, name] : Spelling<E>::table())
    if (text == name) return value;
  throw InputError(unknown_value_message(text, choice_names<E>()));
}

#define SDP_CHOICE(E)                                         \
  template const std::vector<std::string>& choice_names<E>(); \
  template E parse_choice<E>(const std::string& text);        \
  std::string to_string(E value) {                            \
    return name_of(value);                                    \
  }

SDP_CHOICE(DevicePreference)
SDP_CHOICE(Precision)
SDP_CHOICE(DataFormat)
SDP_CHOICE(DataShard)
SDP_CHOICE(Augmentation)
SDP_CHOICE(OptimizerKind)
SDP_CHOICE(ScheduleKind)
SDP_CHOICE(CommBackend)
SDP_CHOICE(AllreduceKind)
SDP_CHOICE(Compression)
SDP_CHOICE(InterNode)
SDP_CHOICE(OnNonfinite)
SDP_CHOICE(OnDivergence)
SDP_CHOICE(ProgressMode)
SDP_CHOICE(DecodeChoice)

#undef SDP_CHOICE

LrScaling parse_lr_scaling(const std::string& text) {
  static const std::vector<std::string> rules = {"linear", "sqrt", "none"};
  if (text == "linear") return LrScaling::linear();
  if (text == "sqrt") return LrScaling::sqrt();
  if (text == "none") return LrScaling::none();
  char* end = nullptr;
  const double factor = std::strtod(text.c_str(), &end);
  if (end != text.c_str() && *end == '\0' && std::isfinite(factor) && factor > 0)
    return LrScaling::explicit_factor(factor);
  std::string msg =
      "unknown value '" + text + "' (expected linear, sqrt, none or a positive factor)";
  auto close = closest_names(text, rules, 1);
  if (!close.empty()) msg += "; did you mean '" + close[0] + "'?";
  throw InputError(msg);
}

std::string to_string(const LrScaling& scaling) {
  switch (scaling.kind) {
    case LrScaling::Kind::kLinear:
      return "linear";
    case LrScaling::Kind::kSqrt:
      return "sqrt";
    case LrScaling::Kind::kNone:
      return "none";
    case LrScaling::Kind::kFactor:
      break;
  }
  // The fewest digits that parse_lr_scaling reads back as the same factor: 1.5, not 1.50000.
  std::string text;
  for (int digits = 6; digits <= 17; ++digits) {
    std::ostringstream out;
    out.precision(digits);
    out << scaling.factor;
    text = out.str();
    if (std::strtod(text.c_str(), nullptr) == scaling.factor) break;
  }
  return text;
}

Compression resolve_compression(Compression compression, Precision precision) {
  if (compression != Compression::kAuto) return compression;
  switch (precision) {
    case Precision::kAmpFp16: return Compression::kFp16;
    case Precision::kAmpBf16: return Compression::kBf16;
    case Precision::kFp32:
    case Precision::kTf32: return Compression::kNone;
  }
  return Compression::kNone;
}

}  // namespace sdp
