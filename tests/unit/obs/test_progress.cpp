// The progress bar's text and ETA (obs/progress.hpp), and its drawing protocol on a file:
// redraws throttled, erased before every other line, nothing at all when disabled.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/log.hpp"
#include "obs/progress.hpp"

namespace sdp {
namespace {

TEST(FormatDuration, MinutesSecondsAndHours) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(5.4), "0:05");
  EXPECT_EQ(format_duration(59.6), "1:00");
  EXPECT_EQ(format_duration(123), "2:03");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(-1), "--:--");
  EXPECT_EQ(format_duration(std::nan("")), "--:--");
  EXPECT_EQ(format_duration(INFINITY), "--:--");
}

ProgressState state(int64_t step, int64_t total) {
  ProgressState s;
  s.epoch = 2;
  s.epochs = 3;
  s.step = step;
  s.total_steps = total;
  s.loss = 0.43214;
  s.images_per_sec = 5123.4;
  s.eta_seconds = 42;
  return s;
}

TEST(FormatProgress, ShowsEveryField) {
  const std::string line = format_progress(state(180, 384), 100);
  EXPECT_EQ(line.rfind("epoch 2/3 [", 0), 0u) << line;
  EXPECT_NE(line.find("] 180/384 loss 0.4321  5123 img/s  ETA 0:42"), std::string::npos) << line;
  EXPECT_LE(static_cast<int>(line.size()), 100);
  EXPECT_EQ(line.find('\r'), std::string::npos);
  EXPECT_EQ(line.find('\n'), std::string::npos);
}

TEST(FormatProgress, BarFillsWithTheSteps) {
  auto filled = [](const std::string& line) {
    const auto open = line.find('['), close = line.find(']');
    const std::string bar = line.substr(open + 1, close - open - 1);
    return std::make_pair(static_cast<int>(std::count(bar.begin(), bar.end(), '#')),
                          static_cast<int>(bar.size()));
  };
  auto [none, width0] = filled(format_progress(state(0, 100), 120));
  EXPECT_EQ(none, 0);
  EXPECT_EQ(width0, 30);  // the widest bar
  auto [half, width1] = filled(format_progress(state(50, 100), 120));
  EXPECT_EQ(half, 15);
  auto [all, width2] = filled(format_progress(state(100, 100), 120));
  EXPECT_EQ(all, width2);
  // More steps than planned (never expected) still draw a full bar, not an overflow.
  auto [over, width3] = filled(format_progress(state(150, 100), 120));
  EXPECT_EQ(over, width3);
}

TEST(FormatProgress, NarrowTerminalsDropTheExtrasBeforeTheBar) {
  for (int width : {80, 60, 50, 40, 30, 20}) {
    const std::string line = format_progress(state(180, 384), width);
    EXPECT_LE(static_cast<int>(line.size()), width) << line;
    EXPECT_NE(line.find("180/384"), std::string::npos) << width << ": " << line;
  }
  const std::string narrow = format_progress(state(180, 384), 50);
  EXPECT_NE(narrow.find("ETA"), std::string::npos) << narrow;  // the ETA goes last
  EXPECT_EQ(narrow.find("img/s"), std::string::npos) << narrow;
}

TEST(FormatProgress, UnknownValuesAreLeftOut) {
  ProgressState s = state(1, 10);
  s.loss = std::nan("");  // a skipped update
  s.images_per_sec = 0;
  s.eta_seconds = -1;
  const std::string line = format_progress(s, 100);
  EXPECT_EQ(line.find("loss"), std::string::npos) << line;
  EXPECT_EQ(line.find("img/s"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA --:--"), std::string::npos) << line;
}

TEST(EtaEstimator, UnknownBeforeTheFirstStep) {
  EtaEstimator eta;
  EXPECT_LT(eta.eta(10), 0);
  eta.add_step(0.5);
  EXPECT_DOUBLE_EQ(eta.eta(10), 5.0);
  EXPECT_DOUBLE_EQ(eta.eta(0), 0.0);
  EXPECT_DOUBLE_EQ(eta.eta(-3), 0.0);
}

TEST(EtaEstimator, FollowsTheRecentPace) {
  EtaEstimator eta(0.1);
  eta.add_step(5.0);  // a slow first step (warm-up, allocation)
  for (int i = 0; i < 100; ++i) eta.add_step(0.1);
  EXPECT_NEAR(eta.seconds_per_step(), 0.1, 1e-3);
  EXPECT_NEAR(eta.eta(600), 60.0, 0.5);
  eta.add_step(std::nan(""));  // ignored
  eta.add_step(-1);            // ignored
  EXPECT_NEAR(eta.seconds_per_step(), 0.1, 1e-3);
}

std::string read_all(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string text;
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, f)) text.append(buffer, n);
  return text;
}

TEST(ProgressBar, RedrawsInPlaceThrottledAndErasesBeforeLines) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar(true, f, /*min_interval_s=*/3600, /*width=*/80);
    bar.update(state(1, 10));
    bar.update(state(2, 10));  // within the interval: not drawn
    EXPECT_EQ(bar.draws(), 1);
    // A line printed the way the metric lines are: the bar is erased first, and the next
    // update draws at once, whatever the interval.
    {
      auto lock = terminal_lock();
      erase_status_line();
      std::fputs("[step 2] a metric line\n", f);
    }
    bar.update(state(3, 10));
    EXPECT_EQ(bar.draws(), 2);
    bar.update(state(10, 10));  // the last step is always drawn
    EXPECT_EQ(bar.draws(), 3);
    bar.finish();
    std::fputs("[done] steps=10\n", f);
  }
  const std::string text = read_all(f);
  std::fclose(f);
  EXPECT_EQ(text.rfind("\repoch 2/3 [", 0), 0u) << text;
  // The metric line starts on an erased line and stays whole.
  EXPECT_NE(text.find("\r\033[K[step 2] a metric line\n"), std::string::npos) << text;
  EXPECT_NE(text.find("10/10"), std::string::npos);
  EXPECT_EQ(text.find("2/10"), std::string::npos) << "the throttled update was drawn";
  // Finish erased the bar: the last line is whole and nothing follows it.
  const std::string tail = "\r\033[K[done] steps=10\n";
  ASSERT_GE(text.size(), tail.size());
  EXPECT_EQ(text.substr(text.size() - tail.size()), tail) << text;
}

TEST(ProgressBar, DisabledWritesNothingAndRegistersNoEraser) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar(false, f, 0, 80);
    bar.update(state(1, 10));
    bar.update(state(10, 10));
    bar.finish();
    EXPECT_EQ(bar.draws(), 0);
  }
  EXPECT_EQ(read_all(f), "");
  std::fclose(f);
}

TEST(ProgressBar, LinesModeNeverDraws) {
  EXPECT_FALSE(progress_bar_wanted(ProgressMode::kLines, true));
  EXPECT_TRUE(progress_bar_wanted(ProgressMode::kBar, true));
  EXPECT_FALSE(progress_bar_wanted(ProgressMode::kBar, false));  // rank 0 alone draws
  EXPECT_FALSE(progress_bar_wanted(ProgressMode::kAuto, false));
}

}  // namespace
}  // namespace sdp
