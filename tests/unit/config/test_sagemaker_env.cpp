#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "config/sagemaker_env.hpp"
#include "core/error.hpp"

namespace sdp {
namespace {

namespace fs = std::filesystem;

std::string write_config(const std::string& name, const std::string& text) {
  fs::path dir = fs::temp_directory_path() / ("sdp_sm_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / name) << text;
  return (dir / name).string();
}

std::string load_error(const std::string& text) {
  std::string path = write_config("rc.json", text);
  try {
    load_resource_config(path);
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    return msg;
  }
  ADD_FAILURE() << "expected an InputError for " << text;
  return "";
}

TEST(ResourceConfig, ParsesSageMakerFileWithExtraFields) {
  std::string path = write_config("ok.json", R"({
    "current_host": "algo-2", "current_instance_type": "ml.p4d.24xlarge",
    "current_group_name": "homogeneousCluster", "hosts": ["algo-1", "algo-2"],
    "instance_groups": [{"instance_group_name": "homogeneousCluster", "hosts": ["algo-1", "algo-2"]}],
    "network_interface_name": "eth0"})");
  ResourceConfig rc = load_resource_config(path);
  EXPECT_EQ(rc.current_host, "algo-2");
  EXPECT_EQ(rc.hosts, (std::vector<std::string>{"algo-1", "algo-2"}));
  EXPECT_EQ(rc.host_index(), 1);
  EXPECT_EQ(rc.network_interface_name, "eth0");
}

TEST(ResourceConfig, RejectsEveryMalformedShape) {
  EXPECT_NE(load_error(R"({"current_host": "algo-1", "hosts": ["algo-1")").find("malformed JSON"), std::string::npos);
  EXPECT_NE(load_error(R"(["algo-1"])").find("expected a JSON object"), std::string::npos);
  // Fuzzing finding (docs/robustness.md): a number beyond double's range is nlohmann's
  // out_of_range, not a parse_error, and escaped read_json_file as an uncaught exception.
  EXPECT_NE(load_error(R"({"current_host": "algo-1", "hosts": ["algo-1"], "x": 1e999})").find("malformed JSON"),
            std::string::npos);
  EXPECT_NE(load_error(R"({"hosts": ["algo-1"]})").find("'current_host' is missing"), std::string::npos);
  EXPECT_NE(load_error(R"({"current_host": "algo-1"})").find("'hosts' is missing"), std::string::npos);
  EXPECT_NE(load_error(R"({"current_host": 1, "hosts": ["algo-1"]})").find("must be a string"), std::string::npos);
  EXPECT_NE(load_error(R"({"current_host": "algo-1", "hosts": "algo-1"})").find("must be a list"), std::string::npos);
  EXPECT_NE(load_error(R"({"current_host": "algo-1", "hosts": []})").find("'hosts' is empty"), std::string::npos);
  EXPECT_NE(load_error(R"({"current_host": "algo-1", "hosts": ["algo-1", "algo-1"]})").find("more than once"),
            std::string::npos);
  EXPECT_NE(load_error(R"({"current_host": "algo-3", "hosts": ["algo-1", "algo-2"]})")
                .find("'current_host' is 'algo-3', which is not in 'hosts' [algo-1, algo-2]"),
            std::string::npos);
}

TEST(ResourceConfig, MissingFileIsAnInputError) {
  EXPECT_THROW(load_resource_config("/nonexistent/resourceconfig.json"), InputError);
}

TEST(ResourceConfig, FromSageMakerEnvironmentVariables) {
  ::unsetenv("SM_HOSTS");
  EXPECT_FALSE(resource_config_from_env().has_value());
  ::setenv("SM_HOSTS", R"(["algo-1","algo-2"])", 1);
  ::setenv("SM_CURRENT_HOST", "algo-1", 1);
  auto rc = resource_config_from_env();
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(rc->hosts.size(), 2u);
  EXPECT_EQ(rc->host_index(), 0);
  ::setenv("SM_HOSTS", "algo-1,algo-2", 1);
  EXPECT_THROW(resource_config_from_env(), InputError);
  ::unsetenv("SM_HOSTS");
  ::unsetenv("SM_CURRENT_HOST");
}

TEST(SageMakerVariables, ReadsChannelsAndDirectories) {
  ::setenv("SM_CHANNEL_TRAINING", "/opt/ml/input/data/training", 1);
  ::setenv("SM_MODEL_DIR", "/opt/ml/model", 1);
  ::setenv("SM_NUM_GPUS", "8", 1);
  SageMakerVariables vars = read_sagemaker_variables();
  bool found = false;
  for (const auto& [name, path] : vars.channels)
    found |= name == "TRAINING" && path == "/opt/ml/input/data/training";
  EXPECT_TRUE(found);
  EXPECT_EQ(vars.model_dir, "/opt/ml/model");
  EXPECT_EQ(vars.num_gpus, 8);
}

// inputdataconfig.json decides data.shard: auto (ShardedByS3Key -> one set per host), from
// the toolkit's SM_INPUT_DATA_CONFIG first, the file otherwise.
TEST(ChannelConfig, FindsTheChannelADataPathNames) {
  ::unsetenv("SM_INPUT_DATA_CONFIG");
  const std::string file = write_config(
      "inputdataconfig.json",
      R"({"train": {"TrainingInputMode": "File", "S3DistributionType": "ShardedByS3Key", "RecordWrapperType": "None"},
          "validation": {"TrainingInputMode": "Pipe"}})");
  const auto train = channel_config("/opt/ml/input/data/train", file);
  ASSERT_TRUE(train.has_value());
  EXPECT_EQ(train->distribution, "ShardedByS3Key");
  EXPECT_EQ(train->input_mode, "File");
  const auto validation = channel_config("/opt/ml/input/data/validation/", file);
  ASSERT_TRUE(validation.has_value());
  EXPECT_EQ(validation->distribution, "FullyReplicated");  // SageMaker's default
  EXPECT_EQ(validation->input_mode, "Pipe");
  EXPECT_FALSE(channel_config("/data/imagenet", file).has_value());
  EXPECT_FALSE(channel_config("/opt/ml/input/data/train", file + ".missing").has_value());

  ::setenv("SM_INPUT_DATA_CONFIG", R"({"imagenet": {"S3DistributionType": "ShardedByS3Key"}})", 1);
  EXPECT_EQ(channel_config("/data/imagenet", file)->distribution, "ShardedByS3Key");
  EXPECT_FALSE(channel_config("/opt/ml/input/data/train", file).has_value());  // the variable wins
  ::setenv("SM_INPUT_DATA_CONFIG", R"({"imagenet": {"S3DistributionType": 3}})", 1);
  try {
    channel_config("/data/imagenet", file);
    ADD_FAILURE() << "a number as S3DistributionType was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("key 'imagenet.S3DistributionType': expected a string"), std::string::npos)
        << e.what();
  }
  ::unsetenv("SM_INPUT_DATA_CONFIG");
}

// Runs with SM_OUTPUT_DIR / SM_OUTPUT_DATA_DIR as given (nullptr: unset), restoring neither:
// every test that reads them sets them.
void set_output_env(const char* dir, const char* data_dir) {
  dir ? ::setenv("SM_OUTPUT_DIR", dir, 1) : ::unsetenv("SM_OUTPUT_DIR");
  data_dir ? ::setenv("SM_OUTPUT_DATA_DIR", data_dir, 1) : ::unsetenv("SM_OUTPUT_DATA_DIR");
}

TEST(SageMakerOutputs, FromTheResourceConfigsPlaceInItsTree) {
  set_output_env(nullptr, nullptr);
  SageMakerOutputs o = find_sagemaker_outputs("/opt/ml/input/config/resourceconfig.json");
  EXPECT_TRUE(o.on_sagemaker());
  EXPECT_EQ(o.dir, "/opt/ml/output");
  EXPECT_EQ(o.data_dir, "/opt/ml/output/data");
  EXPECT_EQ(o.failure_file(), "/opt/ml/output/failure");
  EXPECT_EQ(o.tensorboard_dir(), "/opt/ml/output/tensorboard");
  // A tree a test fakes: the same layout anywhere.
  EXPECT_EQ(find_sagemaker_outputs("/tmp/job/opt/ml/input/config/../config/resourceconfig.json").dir,
            "/tmp/job/opt/ml/output");
  // A resourceconfig.json elsewhere (--resource-config of a test), or none: not SageMaker.
  for (const char* other : {"/tmp/rc.json", "/tmp/config/resourceconfig.json", "/tmp/input/x/resourceconfig.json", ""}) {
    const SageMakerOutputs none = find_sagemaker_outputs(other);
    EXPECT_FALSE(none.on_sagemaker()) << other;
    EXPECT_EQ(none.failure_file(), "") << other;
    EXPECT_EQ(none.tensorboard_dir(), "") << other;
  }
}

TEST(SageMakerOutputs, TheToolkitsVariablesWin) {
  set_output_env("/elsewhere/output", nullptr);
  EXPECT_EQ(find_sagemaker_outputs("").dir, "/elsewhere/output");
  EXPECT_EQ(find_sagemaker_outputs("/opt/ml/input/config/resourceconfig.json").data_dir, "/elsewhere/output/data");
  set_output_env("/elsewhere/output", "/data/out");
  EXPECT_EQ(find_sagemaker_outputs("").data_dir, "/data/out");
  set_output_env(nullptr, "/data/out");  // the data directory alone does not say SageMaker
  EXPECT_FALSE(find_sagemaker_outputs("").on_sagemaker());
  set_output_env(nullptr, nullptr);
}

TEST(SageMakerOutputs, RelativeOutputsGoUnderTheDataDirectory) {
  SageMakerOutputs sm{"/opt/ml/output", "/opt/ml/output/data"};
  JobSpec spec;  // defaults: metrics out/metrics.jsonl, timeline none, tensorboard auto
  spec.output.timeline = "tl/trace.json";
  resolve_output_locations(spec, sm);
  EXPECT_EQ(spec.output.metrics, "/opt/ml/output/data/out/metrics.jsonl");
  EXPECT_EQ(spec.output.timeline, "/opt/ml/output/data/tl/trace.json");
  EXPECT_EQ(spec.output.tensorboard, "/opt/ml/output/tensorboard");
  // Absolute paths and "" (off) stay; so do the model and checkpoints (their own SM_* defaults).
  JobSpec mine;
  mine.output.metrics = "/mnt/m.jsonl";
  mine.output.timeline = "";
  mine.output.tensorboard = "./tb";
  mine.output.model_dir = "model";
  resolve_output_locations(mine, sm);
  EXPECT_EQ(mine.output.metrics, "/mnt/m.jsonl");
  EXPECT_EQ(mine.output.timeline, "");
  EXPECT_EQ(mine.output.tensorboard, "/opt/ml/output/data/tb");
  EXPECT_EQ(mine.output.model_dir, "model");
  mine.output.tensorboard = "";
  resolve_output_locations(mine, sm);
  EXPECT_EQ(mine.output.tensorboard, "");
}

TEST(SageMakerOutputs, OffSageMakerPathsStayAndTensorBoardAutoIsOff) {
  JobSpec spec;
  spec.output.timeline = "tl.json";
  resolve_output_locations(spec, SageMakerOutputs{});
  EXPECT_EQ(spec.output.metrics, "out/metrics.jsonl");
  EXPECT_EQ(spec.output.timeline, "tl.json");
  EXPECT_EQ(spec.output.tensorboard, "auto");  // printed as the other auto keys are
  EXPECT_EQ(tensorboard_directory(spec.output), "");
  spec.output.tensorboard = "tb";
  resolve_output_locations(spec, SageMakerOutputs{});
  EXPECT_EQ(tensorboard_directory(spec.output), "tb");
  spec.output.tensorboard = "";
  EXPECT_EQ(tensorboard_directory(spec.output), "");
}

}  // namespace
}  // namespace sdp
