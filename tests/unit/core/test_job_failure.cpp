// report_job_error (core/job_failure.hpp): the failure file holds the job's first error, as one
// line, whatever comes after it, and nothing is written without a failure file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/job_failure.hpp"

namespace sdp {
namespace {

namespace fs = std::filesystem;

struct FailureDir {
  fs::path dir = fs::temp_directory_path() / ("sdp-job-failure-" + std::to_string(::getpid()));
  FailureDir() { fs::create_directories(dir); }
  ~FailureDir() {
    set_failure_file("");
    fs::remove_all(dir);
  }
  std::string file() const { return (dir / "failure").string(); }
  std::string text() const {
    std::ifstream in(file());
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
};

TEST(JobFailure, FirstErrorWinsAsOneLine) {
  FailureDir d;
  set_failure_file(d.file());
  report_job_error("key 'train.epochs': expected an integer\nsecond line");
  report_job_error("the job ended with exit status 2");  // says less: must not replace it
  EXPECT_EQ(d.text(), "sdp-train: error: key 'train.epochs': expected an integer second line\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(d.dir), fs::directory_iterator{}), 1);  // nothing aside
}

TEST(JobFailure, ConcurrentReportersLeaveOneWholeLine) {
  FailureDir d;
  set_failure_file(d.file());
  std::vector<std::thread> threads;  // tests may; the product starts threads with start_thread
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([t] { report_job_error("rank " + std::to_string(t) + ": " + std::string(4000, 'x')); });
  for (auto& t : threads) t.join();
  const std::string text = d.text();
  EXPECT_EQ(text.size(), std::string("sdp-train: error: rank 0: ").size() + 4000 + 1);
  EXPECT_EQ(text.rfind("sdp-train: error: rank ", 0), 0u);
  EXPECT_EQ(std::distance(fs::directory_iterator(d.dir), fs::directory_iterator{}), 1);
}

TEST(JobFailure, NoFileOffSageMaker) {
  FailureDir d;
  set_failure_file("");
  report_job_error("printed only");
  EXPECT_TRUE(fs::is_empty(d.dir));
}

}  // namespace
}  // namespace sdp
