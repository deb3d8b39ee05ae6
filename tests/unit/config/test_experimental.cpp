#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <tuple>

#include "config/experimental.hpp"
#include "config/job_spec_loader.hpp"

namespace sdp {
namespace {

JobSpec load(const std::string& yaml) {
  JobSpecLoader loader;
  loader.apply_yaml_text(yaml, "job.yaml");
  return loader.finish();
}

TEST(Experimental, TheDefaultsUseNone) {
  EXPECT_TRUE(experimental_values_used(load("{}")).empty());
  EXPECT_EQ(describe_experimental_values(load("{}")), "");
}

TEST(Experimental, AJobIsToldEachExperimentalValueItSets) {
  const JobSpec spec = load(
      "device: cuda\nprecision: amp-fp16\nmodel: {batchnorm: folded, grad_sum: separate}\n"
      "data: {nvjpeg_backend: gpu_hybrid}\n");
  const auto used = experimental_values_used(spec);
  ASSERT_EQ(used.size(), 2u);
  EXPECT_EQ(used[0].key, "model.batchnorm");
  EXPECT_EQ(used[0].value, "folded");
  EXPECT_EQ(used[1].key, "data.nvjpeg_backend");
  EXPECT_EQ(used[1].value, "gpu_hybrid");
  const std::string line = describe_experimental_values(spec);
  EXPECT_NE(line.find("model.batchnorm=folded"), std::string::npos) << line;
  EXPECT_NE(line.find("data.nvjpeg_backend=gpu_hybrid"), std::string::npos) << line;
  EXPECT_NE(line.find("not yet run on a GPU"), std::string::npos) << line;
}

TEST(Experimental, EveryListedValueIsOneTheLoaderAccepts) {
  // A value the loader rejected would make the list's entry unreachable (a typo in it). They
  // are GPU paths, and some need 16-bit activations.
  for (const ExperimentalValue& v : experimental_values()) {
    const std::string key(v.key);
    const size_t dot = key.find('.');
    const std::string yaml =
        "device: cuda\nprecision: amp-fp16\n" + key.substr(0, dot) + ": {" + key.substr(dot + 1) + ": " + std::string(v.value) + "}\n";
    const JobSpec spec = load(yaml);
    const auto used = experimental_values_used(spec);
    ASSERT_EQ(used.size(), 1u) << yaml;
    EXPECT_EQ(used[0].value, v.value);
  }
}

// docs/job-spec.md's "Experimental keys" table is this list, row for row.
TEST(Experimental, TheReferenceListsExactlyTheseValues) {
  std::ifstream in(std::string(SDP_SOURCE_DIR) + "/docs/job-spec.md");
  ASSERT_TRUE(in) << "docs/job-spec.md";
  using Row = std::tuple<std::string, std::string, std::string>;
  std::set<Row> documented;
  bool in_section = false;
  const std::regex row(R"(^\| `([a-z_.]+)` \| `([a-z_0-9]+)` \| (.*?) \|$)");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Experimental keys";
    std::smatch m;
    if (in_section && std::regex_match(line, m, row)) documented.insert({m[1], m[2], m[3]});
  }
  std::set<Row> listed;
  for (const ExperimentalValue& v : experimental_values())
    listed.insert({std::string(v.key), std::string(v.value), std::string(v.unchecked)});
  EXPECT_EQ(documented, listed) << "docs/job-spec.md's \"## Experimental keys\" table and "
                                   "lib/config/experimental.cpp differ";
}

}  // namespace
}  // namespace sdp
