// MemoryTracker over CachingAllocators on simulated devices: every delta is known to the byte,
// so these tests check the stage arithmetic exactly (nesting, overlap, resets, several devices).
#include <gtest/gtest.h>

#include "memscope/caching_allocator.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/tracker.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

constexpr std::int64_t MB = static_cast<std::int64_t>(MiB);  // sizes here are multiples of 2 MiB

class TrackerOnSimulatedDevice : public ::testing::Test {
 protected:
  CachingAllocator gpu{std::make_shared<SimulatedBackend>(64 * GiB)};

  void* alloc(std::int64_t bytes) { return gpu.allocate(static_cast<std::size_t>(bytes)); }
  void spike(std::int64_t bytes) { gpu.deallocate(alloc(bytes)); }

  static std::int64_t get(const Metrics& m, const std::string& key) {
    auto it = m.find(key);
    if (it == m.end()) throw std::runtime_error("missing metric " + key);
    return std::get<std::int64_t>(it->second);
  }
  static void expect_stage(const Metrics& m, const std::string& stage, std::int64_t alloc,
                           std::int64_t peaked, const std::string& label = "gpu") {
    EXPECT_EQ(get(m, stage + "_mem_" + label + "_alloc_delta"), alloc) << stage;
    EXPECT_EQ(get(m, stage + "_mem_" + label + "_peaked_delta"), peaked) << stage;
  }
  TrackerOptions gpu_only() { return {.sources = {make_allocator_source(gpu)}}; }
};

TEST_F(TrackerOnSimulatedDevice, TransientSpikeInsideAStage) {
  MemoryTracker tracker(gpu_only());
  void* kept = nullptr;
  {
    auto train = tracker.stage("train");
    kept = alloc(100 * MB);
    spike(300 * MB);
  }
  Metrics m = tracker.metrics("train");
  expect_stage(m, "train", 100 * MB, 300 * MB);
  EXPECT_NE(tracker.notes().at("gpu").find(", peak-scope"), std::string::npos);
  EXPECT_TRUE(m.contains("train_runtime"));
  gpu.deallocate(kept);
}

TEST_F(TrackerOnSimulatedDevice, EvalInsideTrainBothExact) {
  MemoryTracker tracker(gpu_only());
  tracker.start("train");
  void* a = alloc(200 * MB);
  tracker.start("eval");
  void* b = alloc(50 * MB);
  spike(500 * MB);
  tracker.stop("eval");
  gpu.deallocate(a);
  spike(100 * MB);
  tracker.stop("train");
  // train: 0 -> 50, peak 200 + 50 + 500; eval: 200 -> 250, peak 750.
  expect_stage(tracker.metrics("train"), "train", 50 * MB, 700 * MB);
  expect_stage(tracker.metrics("eval"), "eval", 50 * MB, 500 * MB);
  gpu.deallocate(b);
}

TEST_F(TrackerOnSimulatedDevice, OverlappingStagesClosedOutOfOrder) {
  MemoryTracker tracker(gpu_only());
  tracker.start("a");
  void* x = alloc(64 * MB);
  tracker.start("b");
  spike(256 * MB);
  tracker.stop("a");  // a is not the innermost stage
  void* y = alloc(32 * MB);
  spike(128 * MB);
  tracker.stop("b");
  expect_stage(tracker.metrics("a"), "a", 64 * MB, 256 * MB);
  // b: 64 -> 96; its peak is the 320 it shared with a, not the later 224.
  expect_stage(tracker.metrics("b"), "b", 32 * MB, 224 * MB);
  gpu.deallocate(x);
  gpu.deallocate(y);
}

TEST_F(TrackerOnSimulatedDevice, ResetPeakStatsMidStageAffectsNoStage) {
  MemoryTracker tracker(gpu_only());
  auto outer = tracker.stage("outer");
  tracker.start("inner");
  spike(400 * MB);
  gpu.reset_peak_stats();
  EXPECT_EQ(gpu.stats().allocated_bytes[0].peak, 0);  // the global peak really was reset
  spike(40 * MB);
  tracker.stop("inner");
  outer.stop();
  expect_stage(tracker.metrics("inner"), "inner", 0, 400 * MB);
  expect_stage(tracker.metrics("outer"), "outer", 0, 400 * MB);
}

TEST_F(TrackerOnSimulatedDevice, NegativeAllocDelta) {
  void* before = alloc(80 * MB);
  MemoryTracker tracker(gpu_only());
  tracker.start("cleanup");
  gpu.deallocate(before);
  tracker.stop("cleanup");
  // peaked = peak - end, and the peak includes the start: alloc + peaked = 0, nothing needed.
  expect_stage(tracker.metrics("cleanup"), "cleanup", -80 * MB, 80 * MB);
}

TEST_F(TrackerOnSimulatedDevice, InitAndBaselineReportedWithTheFirstStage) {
  void* model = alloc(10 * MB);       // before the tracker: the baseline
  MemoryTracker tracker(gpu_only());  // init starts here
  void* weights = alloc(20 * MB);
  spike(6 * MB);
  tracker.start("train");  // ... and ends here
  void* grads = alloc(30 * MB);
  tracker.stop("train");
  tracker.start("eval");
  tracker.stop("eval");

  Metrics train;
  tracker.update_metrics("train", train);
  expect_stage(train, "init", 20 * MB, 6 * MB);
  EXPECT_EQ(get(train, "before_init_mem_gpu"), 10 * MB);
  expect_stage(train, "train", 30 * MB, 0);

  Metrics eval;
  tracker.update_metrics("eval", eval);  // init goes with the first report only
  EXPECT_FALSE(eval.contains("init_mem_gpu_alloc_delta"));
  EXPECT_FALSE(eval.contains("before_init_mem_gpu"));
  expect_stage(eval, "eval", 0, 0);
  for (void* p : {model, weights, grads}) gpu.deallocate(p);
}

TEST_F(TrackerOnSimulatedDevice, SeveralDevicesGetIndexedKeysAndThePlainFirst) {
  CachingAllocator gpu1{std::make_shared<SimulatedBackend>(64 * GiB)};
  MemoryTracker tracker({.sources = {make_allocator_source(gpu), make_allocator_source(gpu1)}});
  tracker.start("train");
  void* a = alloc(10 * MB);
  gpu1.deallocate(gpu1.allocate(60 * MiB));
  tracker.stop("train");
  Metrics m = tracker.metrics("train");
  expect_stage(m, "train", 10 * MB, 0, "gpu");
  expect_stage(m, "train", 10 * MB, 0, "gpu0");
  expect_stage(m, "train", 0, 60 * MB, "gpu1");
  EXPECT_EQ(tracker.sources()[1].label, "gpu1");
  gpu.deallocate(a);
}

TEST_F(TrackerOnSimulatedDevice, UnavailableSourceContributesNothingAndSaysWhy) {
  MemoryTracker tracker(
      {.sources = {make_unavailable_source(SourceKind::gpu, "cuda:0", "no CUDA driver")}});
  tracker.start("train");
  tracker.stop("train");
  Metrics m = tracker.metrics("train");
  EXPECT_FALSE(m.contains("train_mem_gpu_alloc_delta"));
  EXPECT_EQ(tracker.notes().at("gpu"), "cuda:0 unavailable: no CUDA driver");
  EXPECT_NE(tracker.describe_sources().find("no CUDA driver"), std::string::npos);
}

// The metrics a stage reports are numbers only (dashboards plot them); the text says how they
// were measured once, under log_metrics' table, not as a key per stage padded to its width.
TEST_F(TrackerOnSimulatedDevice, MetricsAreNumbersAndTheNotesArePrintedOnce) {
  const std::string reason(200, 'r');
  MemoryTracker tracker({.sources = {make_allocator_source(gpu),
                                     make_unavailable_source(SourceKind::gpu, "cuda:0", reason)}});
  Metrics m;
  for (const char* stage : {"train", "eval"}) {
    tracker.start(stage);
    tracker.stop(stage);
    tracker.update_metrics(stage, m);
  }
  ASSERT_TRUE(m.contains("train_mem_gpu_alloc_delta"));
  for (const auto& [key, value] : m) {
    EXPECT_FALSE(std::holds_alternative<std::string>(value)) << key;
  }
  const std::string table = format_metrics_table("all", m, {}, tracker.notes());
  std::size_t count = 0;
  for (std::size_t at = table.find(reason); at != std::string::npos;
       at = table.find(reason, at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u) << table;
  // No line is padded anywhere near the reason's width.
  const std::string first_line_of_eval = table.substr(table.find("  eval_"));
  EXPECT_LT(first_line_of_eval.find('\n'), 80u) << table;
}

// With report_modes, the old per-stage keys are back; a text value does not widen the column.
TEST_F(TrackerOnSimulatedDevice, ReportModesPutsTheTextInEveryStage) {
  MemoryTracker tracker(
      {.sources = {make_allocator_source(gpu),
                   make_unavailable_source(SourceKind::gpu, "cuda:0", std::string(200, 'r'))},
       .report_modes = true});
  tracker.start("train");
  tracker.stop("train");
  Metrics m = tracker.metrics("train");
  EXPECT_EQ(std::get<std::string>(m.at("train_mem_gpu_mode")), "peak-scope");
  const std::string table = format_metrics_table("train", m);
  const std::size_t line = table.find("  train_mem_gpu_alloc_delta");
  EXPECT_LT(table.find('\n', line) - line, 80u) << table;
}

TEST_F(TrackerOnSimulatedDevice, AbsoluteValuesOnRequest) {
  void* base = alloc(4 * MB);
  TrackerOptions options = gpu_only();
  options.absolute_values = true;
  options.report_modes = false;
  MemoryTracker tracker(options);
  tracker.start("train");
  void* more = alloc(8 * MB);
  spike(16 * MB);
  tracker.stop("train");
  Metrics m = tracker.metrics("train");
  EXPECT_EQ(get(m, "train_mem_gpu_begin"), 4 * MB);
  EXPECT_EQ(get(m, "train_mem_gpu_end"), 12 * MB);
  EXPECT_EQ(get(m, "train_mem_gpu_peak"), 28 * MB);
  EXPECT_FALSE(m.contains("train_mem_gpu_mode"));
  gpu.deallocate(base);
  gpu.deallocate(more);
}

TEST_F(TrackerOnSimulatedDevice, RerunReplacesTheEarlierResult) {
  MemoryTracker tracker(gpu_only());
  tracker.start("eval");
  spike(100 * MB);
  tracker.stop("eval");
  tracker.start("eval");
  spike(20 * MB);
  tracker.stop("eval");
  expect_stage(tracker.metrics("eval"), "eval", 0, 20 * MB);
}

}  // namespace
}  // namespace memscope
