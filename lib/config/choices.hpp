// The job spec's keys that take one of a fixed set of words, as enums. Text becomes an enum
// here, once, when the spec is read (job_spec_loader.hpp); everything downstream switches
// on the enum and never compares strings. Each enum's spelling lives in one table
// (choices.cpp), which parse_choice, choice_names and to_string all read, so what the
// loader accepts and what `sdp-train validate` prints cannot drift apart.
#pragma once

#include <string>
#include <vector>

#include "config/lr_scaling.hpp"

namespace sdp {

enum class DevicePreference { kAuto, kCpu, kCuda };               // device
enum class Precision { kFp32, kAmpFp16, kAmpBf16, kTf32 };        // precision
enum class DataFormat { kMnist, kCifar10, kSynthetic, kTfrecord, kImageFolder, kTarShards, kLibsvm };  // data.format
enum class DataShard { kAuto, kRank, kHost };                     // data.shard
enum class Augmentation { kAuto, kNone, kCropFlip, kFlip };            // data.augment
enum class OptimizerKind { kSgd, kAdam, kAdamW, kLars, kLamb, kAdagrad, kFtrl };   // optimizer.name
enum class ScheduleKind { kConstant, kStep, kCosine, kLinear };          // optimizer.schedule
enum class CommBackend { kAuto, kMpi, kNccl };                    // distributed.backend
enum class AllreduceKind { kAuto, kFlat, kRing, kHierarchical };  // distributed.allreduce
enum class Compression { kAuto, kNone, kFp16, kBf16 };            // distributed.compression
enum class InterNode { kAuto, kNccl, kHost };                     // distributed.inter_node
enum class OnNonfinite { kAbort, kSkip };                         // train.on_nonfinite
enum class OnDivergence { kWarn, kAbort };                        // train.on_divergence
enum class ProgressMode { kAuto, kBar, kLines };                  // output.progress
enum class DecodeChoice { kAuto, kCpu, kGpu };                    // data.decode

// The words an enum accepts, in documentation order.
template <typename E>
const std::vector<std::string>& choice_names();

// `text` as an enum. Anything else throws InputError "unknown value 'x' (expected one of:
// a, b, c)", with "; did you mean 'y'?" when one is close. The caller adds file and key.
template <typename E>
E parse_choice(const std::string& text);

// The word for a value, as the job spec writes it.
std::string to_string(DevicePreference value);
std::string to_string(Precision value);
std::string to_string(DataFormat value);
std::string to_string(DataShard value);
std::string to_string(Augmentation value);
std::string to_string(OptimizerKind value);
std::string to_string(ScheduleKind value);
std::string to_string(CommBackend value);
std::string to_string(AllreduceKind value);
std::string to_string(Compression value);
std::string to_string(InterNode value);
std::string to_string(OnNonfinite value);
std::string to_string(OnDivergence value);
std::string to_string(ProgressMode value);
std::string to_string(DecodeChoice value);

// optimizer.lr_scaling: linear | sqrt | none, or an explicit factor written as a positive
// number (1.5) or as {factor: 1.5}. The YAML form is the loader's; this takes the text.
LrScaling parse_lr_scaling(const std::string& text);
// "linear", "sqrt", "none" or the factor as a number ("1.5"); parse_lr_scaling reads it back.
std::string to_string(const LrScaling& scaling);

// distributed.compression: auto is the compute dtype under mixed precision (gradients
// reduced in 16 bits as they were computed), none otherwise; the other values stand.
Compression resolve_compression(Compression compression, Precision precision);
// amp-fp16 and amp-bf16: 16-bit activations (tf32 keeps f32 storage).
inline bool is_mixed_precision(Precision p) { return p == Precision::kAmpFp16 || p == Precision::kAmpBf16; }
// tfrecord, tar-shards and image-folder: JPEG/PNG files decoded as batches are made.
inline bool is_encoded_images(DataFormat f) {
  return f == DataFormat::kTfrecord || f == DataFormat::kImageFolder || f == DataFormat::kTarShards;
}

}  // namespace sdp
