#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "config/did_you_mean.hpp"
#include "config/job_spec_loader.hpp"
#include "config/job_spec_yaml.hpp"
#include "core/error.hpp"

namespace sdp {
namespace {

namespace fs = std::filesystem;

// Writes `text` to a fresh file in the test's temp directory and returns its path.
std::string write_temp(const std::string& name, const std::string& text) {
  fs::path dir = fs::temp_directory_path() / ("sdp_config_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

// The InputError message of `fn`, or a failure if it does not throw one.
template <typename Fn>
std::string input_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError";
  return "";
}

TEST(JobSpecLoader, DefaultsWhenNothingIsGiven) {
  JobSpec spec = JobSpecLoader().finish();
  EXPECT_EQ(spec.model.name, "mlp");
  EXPECT_EQ(spec.data.batch_size, 64);
  EXPECT_DOUBLE_EQ(spec.optimizer.lr, 0.01);
  EXPECT_EQ(spec.distributed.ranks_per_node, 0);
  EXPECT_DOUBLE_EQ(spec.distributed.timeout_s, 600.0);
  EXPECT_EQ(spec.train.accumulate_steps, 1);
  EXPECT_EQ(spec.optimizer.reference_batch, 0);  // unset: data.batch_size
}

TEST(JobSpecLoader, YamlSetsNestedKeysAndRecordsTheirLine) {
  JobSpecLoader loader;
  loader.apply_yaml_text("name: t\nmodel:\n  name: lenet5\ndata: {batch_size: 32, format: mnist}\n"
                         "optimizer:\n  milestones: [3, 6]\n  nesterov: true\n",
                         "job.yaml");
  JobSpec spec = loader.finish();
  EXPECT_EQ(spec.model.name, "lenet5");
  EXPECT_EQ(spec.data.batch_size, 32);
  EXPECT_EQ(spec.data.format, DataFormat::kMnist);
  EXPECT_EQ(spec.optimizer.milestones, (std::vector<int>{3, 6}));
  EXPECT_TRUE(spec.optimizer.nesterov);
  EXPECT_EQ(loader.sources().at("model.name"), "job.yaml:3");
  EXPECT_EQ(loader.sources().at("data.prefetch"), "default");
}

TEST(JobSpecLoader, PrecedenceIsYamlThenHyperparametersThenSet) {
  JobSpecLoader loader;
  loader.apply_yaml_text("optimizer: {lr: 0.05, momentum: 0.5}\ntrain: {epochs: 4}\n", "job.yaml");
  std::string hp = write_temp("hp.json",
                              R"({"optimizer.lr": "0.2", "optimizer.momentum": "0.8", "train": {"epochs": 7},
                                  "sagemaker_program": "train.py", "sagemaker_region": "\"us-east-1\""})");
  loader.apply_hyperparameters_file(hp);
  loader.apply_override("optimizer.lr=0.3");
  JobSpec spec = loader.finish();
  EXPECT_DOUBLE_EQ(spec.optimizer.lr, 0.3);        // --set wins
  EXPECT_DOUBLE_EQ(spec.optimizer.momentum, 0.8);  // hyperparameters beat YAML
  EXPECT_EQ(spec.train.epochs, 7);                 // nested objects flatten to train.epochs
  EXPECT_EQ(loader.sources().at("optimizer.momentum"), hp);
}

TEST(JobSpecLoader, HyperparameterStringsMayBeJsonEncoded) {
  // The SageMaker Python SDK json.dumps every value: a string arrives as "\"adamw\"".
  JobSpecLoader loader;
  loader.apply_hyperparameters_file(write_temp("hp2.json", R"({"optimizer.name": "\"adamw\"", "seed": 7})"));
  JobSpec spec = loader.finish();
  EXPECT_EQ(spec.optimizer.name, OptimizerKind::kAdamW);
  EXPECT_EQ(spec.seed, 7u);
}

TEST(JobSpecLoader, ExpandsEnvironmentVariablesWithNestedDefaults) {
  ::setenv("SDP_TEST_CHANNEL", "/opt/ml/input/data/training", 1);
  ::unsetenv("SDP_TEST_UNSET");
  ::setenv("SDP_TEST_EPOCHS", "9", 1);
  JobSpecLoader loader;
  loader.apply_yaml_text("data:\n  train: ${SDP_TEST_CHANNEL}\n  test: ${SDP_TEST_UNSET:-${SDP_TEST_UNSET:-fallback}/t}\n"
                         "train: {epochs: '${SDP_TEST_EPOCHS:-1}'}\n",
                         "job.yaml");
  JobSpec spec = loader.finish();
  EXPECT_EQ(spec.data.train, "/opt/ml/input/data/training");
  EXPECT_EQ(spec.data.test, "fallback/t");
  EXPECT_EQ(spec.train.epochs, 9);
}

TEST(JobSpecLoader, UnsetVariableWithoutDefaultNamesFileKeyAndVariable) {
  ::unsetenv("SDP_TEST_UNSET");
  JobSpecLoader loader;
  loader.apply_yaml_text("data:\n  format: mnist\n  train: ${SDP_TEST_UNSET}\n", "job.yaml");
  std::string msg = input_error_of([&] { loader.finish(); });
  EXPECT_NE(msg.find("job.yaml:3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("data.train"), std::string::npos) << msg;
  EXPECT_NE(msg.find("SDP_TEST_UNSET is not set"), std::string::npos) << msg;
}

TEST(JobSpecLoader, MalformedYamlGivesLineNumber) {
  std::string msg = input_error_of(
      [] { JobSpecLoader().apply_yaml_text("model:\n  name: lenet5\n  hidden: [1, 2\n", "job.yaml"); });
  EXPECT_NE(msg.find("job.yaml:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed YAML"), std::string::npos) << msg;
}

// A key that is a list or a mapping (`? [a, b]`, `{x: 1}: 2`) is not a name: found by
// fuzzing (docs/robustness.md), it escaped as yaml-cpp's BadConversion instead of exit 2.
TEST(JobSpecLoader, KeysThatAreNotNamesAreInputErrors) {
  for (const char* text : {"? [a, b]\n: 1\n", "{x: 1}: 2\n", "model:\n  ? [name]\n  : mlp\n"}) {
    std::string msg = input_error_of([&] { JobSpecLoader().apply_yaml_text(text, "job.yaml"); });
    EXPECT_NE(msg.find("job.yaml:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("is not a key name"), std::string::npos) << msg;
  }
}

TEST(JobSpecLoader, UnknownKeySuggestsTheClosestOne) {
  std::string msg = input_error_of(
      [] { JobSpecLoader().apply_yaml_text("optimizer:\n  lr: 0.1\n  momentun: 0.9\n", "job.yaml"); });
  EXPECT_NE(msg.find("job.yaml:3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown key 'optimizer.momentun'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'optimizer.momentum'"), std::string::npos) << msg;
  msg = input_error_of([] { JobSpecLoader().apply_yaml_text("modle: {name: mlp}\n", "job.yaml"); });
  EXPECT_NE(msg.find("unknown key 'modle'"), std::string::npos) << msg;
}

TEST(JobSpecLoader, WrongTypesNameTheKeyAndTheValue) {
  std::string msg = input_error_of([] { JobSpecLoader().apply_yaml_text("data:\n  batch_size: many\n", "j.yaml"); });
  EXPECT_NE(msg.find("j.yaml:2: key 'data.batch_size': expected an integer, got 'many'"), std::string::npos)
      << msg;
  msg = input_error_of([] { JobSpecLoader().apply_yaml_text("optimizer: {nesterov: maybe}\n", "j.yaml"); });
  EXPECT_NE(msg.find("optimizer.nesterov"), std::string::npos) << msg;
  msg = input_error_of([] { JobSpecLoader().apply_yaml_text("model: {hidden: [a, b]}\n", "j.yaml"); });
  EXPECT_NE(msg.find("list of integers"), std::string::npos) << msg;
  msg = input_error_of([] { JobSpecLoader().apply_yaml_text("model: lenet5\n", "j.yaml"); });
  EXPECT_NE(msg.find("'model' is a section"), std::string::npos) << msg;
  msg = input_error_of([] { JobSpecLoader().apply_yaml_text("seed: 1\nseed: 2\n", "j.yaml"); });
  EXPECT_NE(msg.find("appears twice"), std::string::npos) << msg;
}

TEST(JobSpecLoader, OutOfRangeValuesAreRejectedWithTheirSource) {
  struct Case {
    std::string yaml, key, text;
  };
  const std::vector<Case> cases = {
      {"data: {batch_size: -4}", "data.batch_size", "must be a positive integer"},
      {"optimizer: {lr: 0}", "optimizer.lr", "must be > 0"},
      {"optimizer: {lr: -0.1}", "optimizer.lr", "must be > 0"},
      {"optimizer: {momentum: 1.5}", "optimizer.momentum", "[0, 1)"},
      {"optimizer: {trust_coefficient: 0}", "optimizer.trust_coefficient", "must be > 0"},
      {"optimizer: {trust_coefficient: -0.01}", "optimizer.trust_coefficient", "must be > 0"},
      {"optimizer: {trust_coefficient: .inf}", "optimizer.trust_coefficient",
       "expected a finite number"},
      {"optimizer: {trust_coefficient: high}", "optimizer.trust_coefficient", "expected a number"},
      {"optimizer: {name: lars, nesterov: true}", "optimizer.nesterov", "no Nesterov variant"},
      {"optimizer: {name: lamb, eps: 0}", "optimizer.eps", "must be > 0"},
      {"optimizer: {lr_scaling: cubic}", "optimizer.lr_scaling", "unknown value 'cubic'"},
      {"optimizer: {schedule: step}", "optimizer.schedule", "needs at least one milestone"},
      {"train: {epochs: 0, max_steps: 0}", "train.epochs", "nothing to train"},
      {"distributed: {ranks_per_node: -2}", "distributed.ranks_per_node", "auto"},
      {"distributed: {bucket_mb: -3}", "distributed.bucket_mb", "or auto"},
      {"distributed: {bucket_mb: big}", "distributed.bucket_mb", "expected 'auto' or a size in MB"},
      {"checkpoint: {keep_last: 0}", "checkpoint.keep_last", ">= 1"},
      {"train: {accumulate_steps: 0}", "train.accumulate_steps", "must be >= 1"},
      {"optimizer: {reference_batch: -1}", "optimizer.reference_batch",
       "must be a positive integer"},
      {"optimizer: {reference_batch: 256.5}", "optimizer.reference_batch", "expected an integer"},
      {"train: {accumulate_steps: [2]}", "train.accumulate_steps", "expected an integer"},
      {"optimizer: {warmup_steps: -5}", "optimizer.warmup_steps", "must be >= 0"},
      {"optimizer: {warmup_steps: 100, warmup_epochs: 1}", "optimizer.warmup_steps", "not both"},
      {"train: {on_nonfinite: ignore}", "train.on_nonfinite", "unknown value 'ignore'"},
      {"train: {on_divergence: abrot}", "train.on_divergence", "did you mean 'abort'"},
      {"train: {label_smoothing: 1}", "train.label_smoothing", "must be in [0, 1)"},
      {"train: {label_smoothing: -0.1}", "train.label_smoothing", "must be in [0, 1)"},
      {"model: {name: lenet5, zero_init_residual: true}", "model.zero_init_residual",
       "resnet models only"},
      {"model: {zero_init_residual: yes please}", "model.zero_init_residual", "expected"},
      {"output: {timeline_layers: true}", "output.timeline_layers", "needs output.timeline"},
  };
  for (const Case& c : cases) {
    // Words are checked as they are read, numbers' ranges at finish(): either may throw.
    std::string msg = input_error_of([&] {
      JobSpecLoader loader;
      loader.apply_yaml_text(c.yaml, "job.yaml");
      loader.finish();
    });
    EXPECT_NE(msg.find("job.yaml:1"), std::string::npos) << c.yaml << " -> " << msg;
    EXPECT_NE(msg.find("'" + c.key + "'"), std::string::npos) << c.yaml << " -> " << msg;
    EXPECT_NE(msg.find(c.text), std::string::npos) << c.yaml << " -> " << msg;
  }
}

TEST(JobSpecLoader, UnknownNamesOfModelsOptimizersAndFormats) {
  for (const auto& [yaml, expect] : std::vector<std::pair<std::string, std::string>>{
           {"model: {name: lenet7}", "did you mean 'lenet5'"},
           {"optimizer: {name: sgdd}", "did you mean 'sgd'"},
           {"optimizer: {name: lamd}", "did you mean 'lamb'"},
           {"optimizer: {name: lrs}", "did you mean 'lars'"},
           {"data: {format: imagenet}", "expected one of: mnist, cifar10, synthetic"},
           {"device: tpu", "expected one of: auto, cpu, cuda"}}) {
    std::string msg = input_error_of([&] { JobSpecLoader().apply_yaml_text(yaml, "job.yaml"); });
    EXPECT_NE(msg.find(expect), std::string::npos) << yaml << " -> " << msg;
    EXPECT_NE(msg.find("job.yaml:1"), std::string::npos) << msg;
  }
}

TEST(JobSpecLoader, OverridesFromSetAndHyperparametersAreChecked) {
  std::string msg = input_error_of([] { JobSpecLoader().apply_override("optimizer.lrr=0.1"); });
  EXPECT_NE(msg.find("--set: unknown key 'optimizer.lrr' (did you mean 'optimizer.lr'"), std::string::npos) << msg;
  msg = input_error_of([] { JobSpecLoader().apply_override("optimizer.lr"); });
  EXPECT_NE(msg.find("expected key.path=value"), std::string::npos) << msg;
  msg = input_error_of([] { JobSpecLoader().apply_override("data.batch_size=1.5"); });
  EXPECT_NE(msg.find("expected an integer, got '1.5'"), std::string::npos) << msg;
  std::string hp = write_temp("hp_bad.json", R"({"train.epochs": "ten"})");
  msg = input_error_of([&] { JobSpecLoader().apply_hyperparameters_file(hp); });
  EXPECT_NE(msg.find(hp + ": key 'train.epochs': expected an integer, got 'ten'"), std::string::npos) << msg;
  hp = write_temp("hp_malformed.json", R"({"train.epochs": )");
  msg = input_error_of([&] { JobSpecLoader().apply_hyperparameters_file(hp); });
  EXPECT_NE(msg.find("malformed JSON"), std::string::npos) << msg;
}

TEST(JobSpecLoader, RanksPerNodeAcceptsAutoOrAnInteger) {
  JobSpecLoader loader;
  loader.apply_override("distributed.ranks_per_node=2");
  EXPECT_EQ(loader.finish().distributed.ranks_per_node, 2);
  loader.apply_override("distributed.ranks_per_node=auto");
  EXPECT_EQ(loader.finish().distributed.ranks_per_node, 0);
  EXPECT_THROW(loader.apply_override("distributed.ranks_per_node=two"), InputError);
}

TEST(JobSpecLoader, BucketMbAcceptsAutoAndPrintsIt) {
  JobSpecLoader loader;
  loader.apply_override("distributed.bucket_mb=auto");
  loader.apply_override("distributed.calibration=cal.json");
  const JobSpec spec = loader.finish();
  EXPECT_EQ(spec.distributed.bucket_mb, kAutoBucketMb);
  EXPECT_EQ(spec.distributed.calibration, "cal.json");
  const std::string yaml = job_spec_to_yaml(spec);
  EXPECT_NE(yaml.find("bucket_mb: auto"), std::string::npos) << yaml;
  loader.apply_override("distributed.bucket_mb=10");
  EXPECT_EQ(loader.finish().distributed.bucket_mb, 10);
}

TEST(JobSpecLoader, AccumulationAndReferenceBatch) {
  JobSpecLoader loader;
  loader.apply_yaml_text(
      "train: {accumulate_steps: 4}\noptimizer: {lr: 0.1, reference_batch: 256}\n", "job.yaml");
  JobSpec spec = loader.finish();
  EXPECT_EQ(spec.train.accumulate_steps, 4);
  EXPECT_EQ(spec.optimizer.reference_batch, 256);
  loader.apply_override("train.accumulate_steps=2");
  EXPECT_EQ(loader.finish().train.accumulate_steps, 2);
}

TEST(JobSpecLoader, MissingFileIsAnInputError) {
  std::string msg = input_error_of([] { JobSpecLoader().apply_yaml_file("/nonexistent/job.yaml"); });
  EXPECT_NE(msg.find("/nonexistent/job.yaml"), std::string::npos) << msg;
}

TEST(JobSpecLoader, ResolvedYamlRoundTripsAndListsEveryKey) {
  JobSpecLoader loader;
  loader.apply_yaml_text("model: {name: resnet20, hidden: [7]}\noptimizer: {lr: 0.125, milestones: [2, 5], schedule: step}\n"
                         "distributed: {ranks_per_node: 2}\n",
                         "job.yaml");
  JobSpec spec = loader.finish();
  std::string yaml = job_spec_to_yaml(spec);
  for (const auto& path : JobSpecLoader::key_paths()) {
    std::string leaf = path.substr(path.rfind('.') == std::string::npos ? 0 : path.rfind('.') + 1);
    EXPECT_NE(yaml.find(leaf + ":"), std::string::npos) << "missing " << path;
  }
  JobSpecLoader again;
  again.apply_yaml_text(yaml, "resolved.yaml");
  JobSpec spec2 = again.finish();
  EXPECT_EQ(job_spec_to_yaml(spec2), yaml);
  EXPECT_EQ(spec2.model.name, "resnet20");
  EXPECT_DOUBLE_EQ(spec2.optimizer.lr, 0.125);
  EXPECT_EQ(spec2.distributed.ranks_per_node, 2);
}

TEST(JobSpecLoader, ShippedConfigsAreValid) {
  ::setenv("SDP_DATA_DIR", "/data", 1);
  for (const auto& entry : fs::directory_iterator(fs::path(SDP_SOURCE_DIR) / "configs")) {
    if (entry.path().extension() != ".yaml") continue;
    JobSpecLoader loader;
    EXPECT_NO_THROW({
      loader.apply_yaml_file(entry.path().string());
      loader.finish();
    }) << entry.path();
  }
}

TEST(ClosestNames, FindsNearMissesOnly) {
  std::vector<std::string> names = {"optimizer.lr", "optimizer.momentum", "data.batch_size"};
  EXPECT_EQ(closest_names("optimizer.lrr", names, 1), std::vector<std::string>{"optimizer.lr"});
  EXPECT_EQ(closest_names("data.batchsize", names, 1), std::vector<std::string>{"data.batch_size"});
  EXPECT_TRUE(closest_names("completely.different", names).empty());
}

}  // namespace
}  // namespace sdp

namespace sdp {
namespace {

TEST(JobSpecLoader, TheDeepFmSamplesHyperparametersBecomeKeys) {
  // As the SageMaker SDK writes them (every value json.dumps'd), with the sample's names.
  JobSpecLoader loader;
  loader.apply_yaml_text("model: {name: deepfm}\ndata: {format: synthetic}\n", "job.yaml");
  loader.apply_hyperparameters_file(write_temp(
      "hp_deepfm.json",
      R"({"feature_size": "117581", "field_size": "39", "embedding_size": "32", "deep_layers": "\"256,128,64\"",
          "dropout": "\"0.5,0.5,0.5\"", "batch_norm": "\"False\"", "l2_reg": "0.0001", "optimizer": "\"Momentum\"",
          "learning_rate": "0.0005", "batch_size": "1024", "num_epochs": "3"})"));
  const JobSpec spec = loader.finish();
  EXPECT_EQ(spec.model.table_rows, 117581);
  EXPECT_EQ(spec.model.fields, 39);
  EXPECT_EQ(spec.model.embedding_size, 32);
  EXPECT_EQ(spec.model.hidden, (std::vector<int>{256, 128, 64}));
  EXPECT_DOUBLE_EQ(spec.model.dropout, 0.5);
  EXPECT_FALSE(spec.model.batch_norm);
  EXPECT_DOUBLE_EQ(spec.model.l2, 0.0001);
  EXPECT_EQ(spec.optimizer.name, OptimizerKind::kSgd);
  EXPECT_DOUBLE_EQ(spec.optimizer.momentum, 0.95);
  EXPECT_DOUBLE_EQ(spec.optimizer.lr, 0.0005);
  EXPECT_EQ(spec.data.batch_size, 1024);
  EXPECT_EQ(spec.train.epochs, 3);
  ASSERT_EQ(spec.source_notes.size(), 11u);
  const auto said = [&](const std::string& text) {
    for (const std::string& note : spec.source_notes)
      if (note.find(text) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(said("feature_size=117581 (the DeepFM sample's) -> model.table_rows=117581"));
  EXPECT_TRUE(said("optimizer=Momentum (the DeepFM sample's) -> optimizer.name=sgd, optimizer.momentum=0.95"));
}

TEST(JobSpecLoader, TheSamplesDropoutMustBeOneShare) {
  JobSpecLoader loader;
  const std::string message = input_error_of(
      [&] { loader.apply_hyperparameters_file(write_temp("hp_drop.json", R"({"dropout": "0.5,0.8"})")); });
  EXPECT_NE(message.find("hyperparameter 'dropout'"), std::string::npos) << message;
  EXPECT_NE(message.find("different share per layer"), std::string::npos) << message;
}

}  // namespace
}  // namespace sdp
