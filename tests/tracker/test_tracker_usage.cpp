// MemoryTracker misuse gives clear UsageErrors, RAII stages never throw from destructors, and
// skipping (flag or environment) makes the tracker inert.
#include <stdlib.h>

#include <string>

#include <gtest/gtest.h>

#include "memscope/errors.hpp"
#include "memscope/tracker.hpp"

namespace memscope {
namespace {

// A source that counts windows, so tests can see what the tracker opened and closed.
class CountingSource final : public MemorySource {
 public:
  int opened = 0;
  int closed = 0;
  std::int64_t value = 0;

  class CountingWindow final : public Window {
   public:
    explicit CountingWindow(CountingSource& s) : s_(s), begin_(s.value) { ++s_.opened; }
    ~CountingWindow() override { close(); }
    [[nodiscard]] std::int64_t begin() const noexcept override { return begin_; }
    Reading close() noexcept override {
      if (!closed_) ++s_.closed;
      closed_ = true;
      return {s_.value, s_.value};
    }

   private:
    CountingSource& s_;
    std::int64_t begin_;
    bool closed_ = false;
  };

  [[nodiscard]] std::string name() const override { return "counter"; }
  [[nodiscard]] SourceKind kind() const noexcept override { return SourceKind::cpu; }
  [[nodiscard]] bool available() const noexcept override { return true; }
  [[nodiscard]] std::string reason() const override { return {}; }
  [[nodiscard]] std::string mode() const override { return "counting"; }
  [[nodiscard]] std::int64_t current() const override { return value; }
  [[nodiscard]] std::unique_ptr<Window> open_window() override {
    return std::make_unique<CountingWindow>(*this);
  }
};

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no UsageError";
}

TEST(TrackerUsage, BadStageNames) {
  MemoryTracker tracker({.sources = {std::make_shared<CountingSource>()}});
  for (const char* bad : {"", "train_eval", "1st", "with space", "tab\t", "é"}) {
    EXPECT_THROW(tracker.start(bad), UsageError) << bad;
  }
  EXPECT_THROW(tracker.start(std::string(65, 'a')), UsageError);
  EXPECT_NO_THROW(tracker.start(std::string(64, 'a')));
  EXPECT_NO_THROW(tracker.start("eval-2.b"));
  EXPECT_NE(message_of([&] { tracker.start("a_b"); }).find("'a_b' is not allowed"),
            std::string::npos);
}

TEST(TrackerUsage, StartTwiceStopUnknownStopTwice) {
  MemoryTracker tracker({.sources = {std::make_shared<CountingSource>()}});
  tracker.start("train");
  EXPECT_NE(message_of([&] { tracker.start("train"); }).find("already running"), std::string::npos);
  EXPECT_NE(message_of([&] { tracker.stop("eval"); }).find("never started"), std::string::npos);
  tracker.stop("train");
  EXPECT_NE(message_of([&] { tracker.stop("train"); }).find("already stopped"), std::string::npos);
  EXPECT_NE(message_of([&] { (void)tracker.metrics("test"); }).find("never ran"),
            std::string::npos);
  tracker.start("test");
  EXPECT_NE(message_of([&] { (void)tracker.metrics("test"); }).find("still running"),
            std::string::npos);
  Metrics m;
  EXPECT_THROW(tracker.update_metrics("test", m), UsageError);
  EXPECT_TRUE(m.empty()) << "a failed update must add nothing";
}

TEST(TrackerUsage, StageHandleStopsOnceAndNeverThrows) {
  auto source = std::make_shared<CountingSource>();
  MemoryTracker tracker({.sources = {source}, .implicit_init = false});
  {
    auto s = tracker.stage("train");
    EXPECT_EQ(tracker.running_stages(), std::vector<std::string>{"train"});
    tracker.stop("train");  // stopped behind the handle's back: its destructor must not throw
  }
  {
    auto s = tracker.stage("eval");
    auto moved = std::move(s);
    moved.stop();
    moved.stop();  // idempotent
  }
  EXPECT_TRUE(tracker.running_stages().empty());
  EXPECT_EQ(source->opened, 2);
  EXPECT_EQ(source->closed, 2);
}

TEST(TrackerUsage, DestroyingTheTrackerClosesRunningWindows) {
  auto source = std::make_shared<CountingSource>();
  {
    MemoryTracker tracker({.sources = {source}});
    tracker.start("train");
  }
  EXPECT_EQ(source->opened, 2);  // init and train
  EXPECT_EQ(source->closed, 2);
}

TEST(TrackerUsage, ExplicitInitReplacesTheImplicitOne) {
  auto source = std::make_shared<CountingSource>();
  source->value = 100;
  MemoryTracker tracker({.sources = {source}});
  source->value = 150;
  tracker.start("init");  // the caller's own init: begins now, not at construction
  source->value = 170;
  tracker.stop("init");
  Metrics m;
  tracker.update_metrics("init", m);
  EXPECT_EQ(std::get<std::int64_t>(m.at("init_mem_cpu_alloc_delta")), 20);
  EXPECT_EQ(std::get<std::int64_t>(m.at("before_init_mem_cpu")), 150);
}

TEST(TrackerUsage, InitIsReportedOnceByTheFirstUpdate) {
  auto source = std::make_shared<CountingSource>();
  source->value = 100;
  MemoryTracker tracker({.sources = {source}});
  EXPECT_TRUE(tracker.init_metrics().empty());  // init still running
  source->value = 130;
  tracker.start("train");  // ends the implicit init
  tracker.stop("train");
  const Metrics init = tracker.init_metrics();
  EXPECT_EQ(std::get<std::int64_t>(init.at("init_mem_cpu_alloc_delta")), 30);
  EXPECT_EQ(std::get<std::int64_t>(init.at("before_init_mem_cpu")), 100);
  EXPECT_FALSE(init.contains("train_mem_cpu_alloc_delta"));
  EXPECT_EQ(tracker.init_metrics(), init);  // asking does not consume it
  Metrics first;
  tracker.update_metrics("train", first);
  for (const auto& [key, value] : init) EXPECT_EQ(first.at(key), value) << key;
  EXPECT_TRUE(first.contains("train_mem_cpu_alloc_delta"));
  Metrics second;
  tracker.update_metrics("train", second);
  EXPECT_FALSE(second.contains("init_mem_cpu_alloc_delta"));
  EXPECT_FALSE(second.contains("before_init_mem_cpu"));
  EXPECT_TRUE(second.contains("train_mem_cpu_alloc_delta"));
}

TEST(TrackerUsage, SkipFlagMakesItInert) {
  auto source = std::make_shared<CountingSource>();
  MemoryTracker tracker({.sources = {source}, .skip_memory_metrics = true});
  EXPECT_FALSE(tracker.enabled());
  tracker.start("train");
  { auto s = tracker.stage("eval"); }
  tracker.stop("train");
  tracker.stop("never-started");  // not even checked: skipping costs nothing
  Metrics m;
  tracker.update_metrics("train", m);
  EXPECT_TRUE(m.empty());
  EXPECT_TRUE(tracker.metrics("train").empty());
  EXPECT_TRUE(tracker.init_metrics().empty());
  EXPECT_EQ(source->opened, 0);
  EXPECT_EQ(tracker.describe_sources(), "memory metrics skipped");
}

TEST(TrackerUsage, SkipFromEnvironment) {
  auto source = std::make_shared<CountingSource>();
  ASSERT_EQ(setenv("MEMSCOPE_SKIP_MEMORY_METRICS", "1", 1), 0);
  EXPECT_FALSE(MemoryTracker({.sources = {source}}).enabled());
  ASSERT_EQ(setenv("MEMSCOPE_SKIP_MEMORY_METRICS", "0", 1), 0);
  EXPECT_TRUE(MemoryTracker({.sources = {source}}).enabled());
  ASSERT_EQ(setenv("MEMSCOPE_SKIP_MEMORY_METRICS", "maybe", 1), 0);
  try {
    MemoryTracker tracker({.sources = {source}});
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "MEMSCOPE_SKIP_MEMORY_METRICS");
    EXPECT_EQ(e.value(), "maybe");
    const std::string message = e.what();  // the variable, the value and what is allowed
    for (const char* part :
         {"MEMSCOPE_SKIP_MEMORY_METRICS='maybe'", "1, true, yes or on", "0, false, no, off"}) {
      EXPECT_NE(message.find(part), std::string::npos) << part << " in " << message;
    }
  }
  // The parser on its own (the Python package calls it too): any case, and empty means unset.
  for (const char* on : {"1", "TRUE", "Yes", "on"}) {
    ASSERT_EQ(setenv("MEMSCOPE_SKIP_MEMORY_METRICS", on, 1), 0);
    EXPECT_TRUE(skip_memory_metrics_from_env()) << on;
  }
  for (const char* off : {"", "0", "False", "no", "OFF"}) {
    ASSERT_EQ(setenv("MEMSCOPE_SKIP_MEMORY_METRICS", off, 1), 0);
    EXPECT_FALSE(skip_memory_metrics_from_env()) << off;
  }
  unsetenv("MEMSCOPE_SKIP_MEMORY_METRICS");
  EXPECT_FALSE(skip_memory_metrics_from_env());
}

TEST(TrackerUsage, NullSourceIsRefused) {
  EXPECT_THROW(MemoryTracker({.sources = {nullptr}}), UsageError);
}

TEST(TrackerUsage, TwoCpuSourcesGetIndexedLabels) {
  auto a = std::make_shared<CountingSource>();
  auto b = std::make_shared<CountingSource>();
  MemoryTracker tracker({.sources = {a, b}, .implicit_init = false});
  tracker.start("x");
  b->value = 5;
  tracker.stop("x");
  Metrics m = tracker.metrics("x");
  EXPECT_EQ(std::get<std::int64_t>(m.at("x_mem_cpu_alloc_delta")), 0);
  EXPECT_EQ(std::get<std::int64_t>(m.at("x_mem_cpu0_alloc_delta")), 0);
  EXPECT_EQ(std::get<std::int64_t>(m.at("x_mem_cpu1_alloc_delta")), 5);
}

}  // namespace
}  // namespace memscope
