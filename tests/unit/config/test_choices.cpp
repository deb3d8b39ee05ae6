#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "config/choices.hpp"
#include "config/job_spec_loader.hpp"
#include "config/job_spec_yaml.hpp"
#include "config/model_names.hpp"
#include "core/error.hpp"

namespace sdp {
namespace {

// Every word of E parses to a value whose to_string is the word again, and the words are
// the documented ones, in order.
template <typename E>
void expect_round_trip(const std::vector<std::string>& words) {
  EXPECT_EQ(choice_names<E>(), words);
  for (const std::string& word : words) EXPECT_EQ(to_string(parse_choice<E>(word)), word);
}

TEST(Choices, EveryWordRoundTrips) {
  expect_round_trip<DevicePreference>({"auto", "cpu", "cuda"});
  expect_round_trip<Precision>({"fp32", "amp-fp16", "amp-bf16", "tf32"});
  expect_round_trip<DataFormat>(
      {"mnist", "cifar10", "synthetic", "tfrecord", "image-folder", "tar-shards", "libsvm"});
  expect_round_trip<DataShard>({"auto", "rank", "host"});
  expect_round_trip<Augmentation>({"auto", "none", "crop-flip", "flip"});
  expect_round_trip<OptimizerKind>({"sgd", "adam", "adamw", "lars", "lamb", "adagrad", "ftrl"});
  expect_round_trip<ScheduleKind>({"constant", "step", "cosine", "linear"});
  expect_round_trip<CommBackend>({"auto", "mpi", "nccl"});
  expect_round_trip<AllreduceKind>({"auto", "flat", "ring", "hierarchical"});
  expect_round_trip<Compression>({"auto", "none", "fp16", "bf16"});
  expect_round_trip<InterNode>({"auto", "nccl", "host"});
  expect_round_trip<OnNonfinite>({"abort", "skip"});
  expect_round_trip<OnDivergence>({"warn", "abort"});
  expect_round_trip<ProgressMode>({"auto", "bar", "lines"});
}

TEST(Choices, EveryEnumeratorHasAWord) {
  // to_string of a value missing from its table would print "?".
  for (auto v : {DevicePreference::kAuto, DevicePreference::kCpu, DevicePreference::kCuda})
    EXPECT_NE(to_string(v), "?");
  for (auto v : {Precision::kFp32, Precision::kAmpFp16, Precision::kAmpBf16})
    EXPECT_NE(to_string(v), "?");
  for (auto v : {DataFormat::kMnist, DataFormat::kCifar10, DataFormat::kSynthetic})
    EXPECT_NE(to_string(v), "?");
  for (auto v : {DataShard::kRank, DataShard::kHost}) EXPECT_NE(to_string(v), "?");
  for (auto v : {Augmentation::kAuto, Augmentation::kNone, Augmentation::kCropFlip})
    EXPECT_NE(to_string(v), "?");
  for (auto v : {OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kAdamW,
                 OptimizerKind::kLars, OptimizerKind::kLamb})
    EXPECT_NE(to_string(v), "?");
  for (auto v : {ScheduleKind::kConstant, ScheduleKind::kStep, ScheduleKind::kCosine, ScheduleKind::kLinear})
    EXPECT_NE(to_string(v), "?");
  for (auto v : {CommBackend::kAuto, CommBackend::kMpi, CommBackend::kNccl})
    EXPECT_NE(to_string(v), "?");
  for (auto v : {AllreduceKind::kAuto, AllreduceKind::kFlat, AllreduceKind::kRing,
                 AllreduceKind::kHierarchical})
    EXPECT_NE(to_string(v), "?");
  for (auto v : {Compression::kAuto, Compression::kNone, Compression::kFp16, Compression::kBf16})
    EXPECT_NE(to_string(v), "?");
  for (auto v : {InterNode::kAuto, InterNode::kNccl, InterNode::kHost}) EXPECT_NE(to_string(v), "?");
  for (auto v : {OnNonfinite::kAbort, OnNonfinite::kSkip}) EXPECT_NE(to_string(v), "?");
  for (auto v : {OnDivergence::kWarn, OnDivergence::kAbort}) EXPECT_NE(to_string(v), "?");
  for (auto v : {ProgressMode::kAuto, ProgressMode::kBar, ProgressMode::kLines})
    EXPECT_NE(to_string(v), "?");
}

// distributed.compression: auto reduces the gradients in the compute precision (16 bits
// under mixed precision, f32 otherwise); an explicit choice stands.
TEST(Choices, CompressionAutoFollowsThePrecision) {
  EXPECT_EQ(resolve_compression(Compression::kAuto, Precision::kFp32), Compression::kNone);
  EXPECT_EQ(resolve_compression(Compression::kAuto, Precision::kAmpFp16), Compression::kFp16);
  EXPECT_EQ(resolve_compression(Compression::kAuto, Precision::kAmpBf16), Compression::kBf16);
  EXPECT_EQ(resolve_compression(Compression::kNone, Precision::kAmpFp16), Compression::kNone);
  EXPECT_EQ(resolve_compression(Compression::kBf16, Precision::kFp32), Compression::kBf16);
  EXPECT_EQ(JobSpec{}.distributed.compression, Compression::kAuto);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError";
  return "";
}

TEST(Choices, ATypoGetsTheClosestWord) {
  EXPECT_EQ(error_of([] { parse_choice<AllreduceKind>("hierarchichal"); }),
            "unknown value 'hierarchichal' (expected one of: auto, flat, ring, hierarchical); "
            "did you mean 'hierarchical'?");
  EXPECT_EQ(error_of([] { parse_choice<Compression>("bf61"); }),
            "unknown value 'bf61' (expected one of: auto, none, fp16, bf16); did you mean 'bf16'?");
  EXPECT_EQ(error_of([] { parse_choice<Precision>("amp_fp16"); }),
            "unknown value 'amp_fp16' (expected one of: fp32, amp-fp16, amp-bf16, tf32); did you mean "
            "'amp-fp16'?");
  // Nothing close: no suggestion. Case matters, as everywhere in the spec.
  EXPECT_EQ(error_of([] { parse_choice<DataFormat>("imagenet"); }),
            "unknown value 'imagenet' (expected one of: mnist, cifar10, synthetic, tfrecord, "
            "image-folder, tar-shards, libsvm)");
  EXPECT_THROW(parse_choice<DevicePreference>("CPU"), InputError);
  EXPECT_THROW(parse_choice<DevicePreference>(""), InputError);
}

TEST(LrScalingChoice, RulesAndFactorsRoundTrip) {
  for (const char* word : {"linear", "sqrt", "none"})
    EXPECT_EQ(to_string(parse_lr_scaling(word)), word);
  EXPECT_EQ(parse_lr_scaling("1.5"), LrScaling::explicit_factor(1.5));
  EXPECT_EQ(to_string(LrScaling::explicit_factor(1.5)), "1.5");
  EXPECT_EQ(to_string(LrScaling::explicit_factor(0.1)), "0.1");
  const LrScaling odd = LrScaling::explicit_factor(1.0 / 3);
  EXPECT_EQ(parse_lr_scaling(to_string(odd)), odd);
  EXPECT_NE(error_of([] { parse_lr_scaling("linaer"); }).find("did you mean 'linear'"),
            std::string::npos);
  EXPECT_THROW(parse_lr_scaling("0"), InputError);
  EXPECT_THROW(parse_lr_scaling("-2"), InputError);
  EXPECT_THROW(parse_lr_scaling("inf"), InputError);
}

JobSpec load(const std::string& yaml) {
  JobSpecLoader loader;
  loader.apply_yaml_text(yaml, "job.yaml");
  return loader.finish();
}

std::string load_error(const std::string& yaml) {
  return error_of([&] { load(yaml); });
}

TEST(ChoiceKeys, TheLoaderFillsTheEnums) {
  const JobSpec spec = load(
      "device: cpu\nprecision: fp32\ndata: {format: cifar10, shard: host, augment: crop-flip}\n"
      "optimizer: {name: adamw, schedule: cosine, lr_scaling: sqrt}\n"
      "distributed: {backend: mpi, allreduce: ring, compression: bf16}\n");
  EXPECT_EQ(spec.device, DevicePreference::kCpu);
  EXPECT_EQ(spec.data.format, DataFormat::kCifar10);
  EXPECT_EQ(spec.data.shard, DataShard::kHost);
  EXPECT_EQ(spec.data.augment, Augmentation::kCropFlip);
  EXPECT_EQ(spec.optimizer.name, OptimizerKind::kAdamW);
  EXPECT_EQ(spec.optimizer.schedule, ScheduleKind::kCosine);
  EXPECT_EQ(spec.optimizer.lr_scaling, LrScaling::sqrt());
  EXPECT_EQ(spec.distributed.backend, CommBackend::kMpi);
  EXPECT_EQ(spec.distributed.allreduce, AllreduceKind::kRing);
  EXPECT_EQ(spec.distributed.compression, Compression::kBf16);
  // Printed as the same quoted words the spec was written with.
  const std::string yaml = job_spec_to_yaml(spec);
  for (const char* line :
       {"device: \"cpu\"", "format: \"cifar10\"", "augment: \"crop-flip\"", "name: \"adamw\"",
        "lr_scaling: \"sqrt\"", "allreduce: \"ring\"", "compression: \"bf16\""})
    EXPECT_NE(yaml.find(line), std::string::npos) << line;
}

TEST(ChoiceKeys, TheFactorIsKeptInEitherForm) {
  EXPECT_EQ(load("optimizer: {lr_scaling: 1.5}").optimizer.lr_scaling,
            LrScaling::explicit_factor(1.5));
  EXPECT_EQ(load("optimizer: {lr_scaling: {factor: 2.5}}").optimizer.lr_scaling,
            LrScaling::explicit_factor(2.5));
  JobSpecLoader loader;
  loader.apply_override("optimizer.lr_scaling={factor: 0.5}");
  EXPECT_EQ(loader.finish().optimizer.lr_scaling, LrScaling::explicit_factor(0.5));
  EXPECT_NE(
      job_spec_to_yaml(load("optimizer: {lr_scaling: {factor: 2.5}}")).find("lr_scaling: \"2.5\""),
      std::string::npos);
  EXPECT_NE(load_error("optimizer: {lr_scaling: {factor: -1}}").find("factor must be > 0"),
            std::string::npos);
  EXPECT_NE(load_error("optimizer: {lr_scaling: {scale: 2}}")
                .find("job.yaml:1: key 'optimizer.lr_scaling'"),
            std::string::npos);
}

TEST(ChoiceKeys, WrongTypesAndTyposNameFileLineAndKey) {
  EXPECT_EQ(load_error("data:\n  format: mnsit\n"),
            "job.yaml:2: key 'data.format': unknown value 'mnsit' (expected one of: mnist, "
            "cifar10, synthetic, tfrecord, image-folder, tar-shards, libsvm); "
            "did you mean 'mnist'?");
  EXPECT_NE(load_error("distributed: {allreduce: [ring, flat]}")
                .find("job.yaml:1: key 'distributed.allreduce': expected one of: auto, flat, ring, "
                      "hierarchical"),
            std::string::npos);
  EXPECT_NE(load_error("device: {kind: cpu}")
                .find("job.yaml:1: key 'device': expected one of: auto, cpu, cuda"),
            std::string::npos);
  EXPECT_NE(load_error("device:\n").find("job.yaml:1: key 'device': unknown value ''"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              JobSpecLoader().apply_override("distributed.compression=fp8");
            }).find("--set: key 'distributed.compression': unknown value 'fp8'"),
            std::string::npos);
}

TEST(ChoiceKeys, WordsMayComeFromTheEnvironment) {
  ::setenv("SDP_TEST_DEVICE", "cpu", 1);
  EXPECT_EQ(load("device: ${SDP_TEST_DEVICE:-auto}").device, DevicePreference::kCpu);
  EXPECT_EQ(load("optimizer: {name: '${SDP_TEST_UNSET_OPT:-adam}'}").optimizer.name,
            OptimizerKind::kAdam);
}

TEST(ModelNames, TheLoaderAcceptsExactlyTheSharedList) {
  for (std::string_view name : kModelNames)
    EXPECT_EQ(load("model: {name: " + std::string(name) + "}").model.name, name);
  const std::string msg = load_error("model: {name: vgg16}");
  for (std::string_view name : kModelNames)
    EXPECT_NE(msg.find(std::string(name)), std::string::npos) << name;
}

// docs/job-spec.md's table row of `key`.
std::string doc_row(const std::string& key) {
  std::ifstream in(std::string(SDP_SOURCE_DIR) + "/docs/job-spec.md");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("| `" + key + "` |", 0) == 0) return line;
  ADD_FAILURE() << "docs/job-spec.md has no row for " << key;
  return "";
}

TEST(Docs, JobSpecReferenceListsEveryWord) {
  auto expect_listed = [](const std::string& key, const std::vector<std::string>& words) {
    const std::string row = doc_row(key);
    for (const auto& w : words)
      EXPECT_NE(row.find("`" + w + "`"), std::string::npos) << key << ": " << w;
  };
  expect_listed("model.name", std::vector<std::string>(kModelNames.begin(), kModelNames.end()));
  expect_listed("device", choice_names<DevicePreference>());
  expect_listed("precision", choice_names<Precision>());
  expect_listed("data.format", choice_names<DataFormat>());
  expect_listed("data.shard", choice_names<DataShard>());
  expect_listed("data.augment", choice_names<Augmentation>());
  expect_listed("optimizer.name", choice_names<OptimizerKind>());
  expect_listed("optimizer.schedule", choice_names<ScheduleKind>());
  expect_listed("distributed.backend", choice_names<CommBackend>());
  expect_listed("distributed.allreduce", choice_names<AllreduceKind>());
  expect_listed("distributed.compression", choice_names<Compression>());
  expect_listed("distributed.inter_node", choice_names<InterNode>());
  expect_listed("train.on_nonfinite", choice_names<OnNonfinite>());
  expect_listed("train.on_divergence", choice_names<OnDivergence>());
  expect_listed("output.progress", choice_names<ProgressMode>());
  expect_listed("optimizer.lr_scaling", {"linear", "sqrt", "none"});
}

}  // namespace
}  // namespace sdp
