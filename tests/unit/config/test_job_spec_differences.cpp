// job_spec_differences (config/job_spec_yaml.hpp): what a resume lists as changed since the
// checkpoint's job spec, one key each, in document order, values as YAML text.
#include <gtest/gtest.h>

#include "config/job_spec_yaml.hpp"
#include "core/error.hpp"

namespace sdp {
namespace {

TEST(JobSpecDifferences, NoneBetweenEqualSpecs) {
  JobSpec spec;
  EXPECT_TRUE(job_spec_differences(job_spec_to_yaml(spec), job_spec_to_yaml(spec)).empty());
}

TEST(JobSpecDifferences, OneEntryPerChangedKeyInDocumentOrder) {
  JobSpec before, after;
  before.optimizer.lr = 0.1;
  after.optimizer.lr = 0.2;
  after.train.epochs = 90;
  after.optimizer.milestones = {30, 60};
  after.output.metrics = "";
  const auto d = job_spec_differences(job_spec_to_yaml(before), job_spec_to_yaml(after));
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].key, "train.epochs");
  EXPECT_EQ(d[0].before, "1");
  EXPECT_EQ(d[0].after, "90");
  EXPECT_EQ(d[1].key, "optimizer.lr");
  EXPECT_EQ(d[1].before, "0.1");
  EXPECT_EQ(d[1].after, "0.2");
  EXPECT_EQ(d[2].key, "optimizer.milestones");
  EXPECT_EQ(d[2].before, "[]");
  EXPECT_EQ(d[2].after, "[30, 60]");
  EXPECT_EQ(d[3].key, "output.metrics");
  EXPECT_EQ(d[3].before, "out/metrics.jsonl");
  EXPECT_EQ(d[3].after, "\"\"");  // empty, not absent
}

TEST(JobSpecDifferences, KeysAnOlderCheckpointLacksAreListedAsAbsent) {
  JobSpec spec;
  std::string old_yaml = job_spec_to_yaml(spec);
  const std::size_t at = old_yaml.find("  tensorboard:");
  ASSERT_NE(at, std::string::npos);
  old_yaml.erase(at, old_yaml.find('\n', at) + 1 - at);
  const auto d = job_spec_differences(old_yaml, job_spec_to_yaml(spec));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].key, "output.tensorboard");
  EXPECT_EQ(d[0].before, "");
  EXPECT_EQ(d[0].after, "auto");
}

TEST(JobSpecDifferences, NotAJobSpecIsAnInputError) {
  const std::string ok = job_spec_to_yaml(JobSpec{});
  EXPECT_THROW(job_spec_differences("[1, 2", ok), InputError);
  EXPECT_THROW(job_spec_differences("just text", ok), InputError);
}

}  // namespace
}  // namespace sdp
