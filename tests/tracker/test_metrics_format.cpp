// metrics_format and the metrics table: honest units chosen per column, the Trainer's
// compatibility format, and alignment.
#include <sstream>
#include <vector>

#include <gtest/gtest.h>

#include "memscope/metrics.hpp"
#include "memscope/rank_table.hpp"
#include "memscope/units.hpp"

namespace memscope {
namespace {

constexpr std::int64_t kMiB = static_cast<std::int64_t>(MiB);
constexpr std::int64_t kGiB = static_cast<std::int64_t>(GiB);

Metrics sample() {
  return {{"init_mem_cpu_alloc_delta", 3 * kGiB / 2},
          {"init_mem_cpu_peaked_delta", std::int64_t{0}},
          {"before_init_mem_cpu", 300 * kMiB},
          {"train_mem_cpu_alloc_delta", -12 * kMiB},
          {"train_mem_cpu_peaked_delta", 512 * kMiB},
          {"train_mem_gpu_mode", std::string("peak-scope")},
          {"train_runtime", 3725.4567},
          {"train_loss", 0.123456},
          {"epoch", 3.0},
          {"total_flos", std::int64_t{123'400'000'000'000}}};
}

TEST(MetricsFormat, OneBinaryUnitForTheMemoryColumn) {
  auto f = metrics_format(sample());
  // The largest value is 1.5 GiB and the smallest non-zero one 12 MiB, so every memory value
  // is in MiB: the small ones keep their digits instead of showing 0.29 or -0.01 GiB.
  EXPECT_EQ(f["init_mem_cpu_alloc_delta"], "1536.00 MiB");
  EXPECT_EQ(f["init_mem_cpu_peaked_delta"], "0.00 MiB");
  EXPECT_EQ(f["before_init_mem_cpu"], "300.00 MiB");
  EXPECT_EQ(f["train_mem_cpu_alloc_delta"], "-12.00 MiB");
  EXPECT_EQ(f["train_mem_gpu_mode"], "peak-scope");
  EXPECT_EQ(f["total_flos"], "123.40 TFLOP");
}

TEST(MetricsFormat, UnitFollowsTheLargestValue) {
  auto mib = metrics_format(
      {{"a_mem_cpu_alloc_delta", 5 * kMiB + kMiB / 4}, {"a_mem_cpu_peaked_delta", 2 * kMiB}});
  EXPECT_EQ(mib["a_mem_cpu_alloc_delta"], "5.25 MiB");
  EXPECT_EQ(mib["a_mem_cpu_peaked_delta"], "2.00 MiB");
  auto finer = metrics_format(
      {{"a_mem_cpu_alloc_delta", 5 * kMiB + kMiB / 4}, {"a_mem_cpu_peaked_delta", kMiB / 2}});
  EXPECT_EQ(finer["a_mem_cpu_alloc_delta"], "5376.00 KiB");  // 0.50 MiB would be under 1.00
  EXPECT_EQ(finer["a_mem_cpu_peaked_delta"], "512.00 KiB");
  auto wide =
      metrics_format({{"a_mem_cpu_alloc_delta", 100 * kGiB}, {"a_mem_cpu_peaked_delta", kMiB}});
  EXPECT_EQ(wide["a_mem_cpu_alloc_delta"], "100.00 GiB");  // MiB would pass 10,000: stays GiB
  EXPECT_EQ(wide["a_mem_cpu_peaked_delta"], "0.00 GiB");
  auto bytes = metrics_format({{"a_mem_cpu_alloc_delta", std::int64_t{700}}});
  EXPECT_EQ(bytes["a_mem_cpu_alloc_delta"], "700 B");
  auto kib = metrics_format({{"a_mem_cpu_alloc_delta", std::int64_t{-3072}}});
  EXPECT_EQ(kib["a_mem_cpu_alloc_delta"], "-3.00 KiB");
  auto gflop = metrics_format({{"total_flos", 5.5e9}});
  EXPECT_EQ(gflop["total_flos"], "5.50 GFLOP");
}

TEST(MetricsFormat, TrainerCompatibility) {
  auto f = metrics_format(sample(), {.trainer_compat = true});
  EXPECT_EQ(f["init_mem_cpu_alloc_delta"], "1536MB");
  EXPECT_EQ(f["train_mem_cpu_alloc_delta"], "-12MB");
  EXPECT_EQ(f["before_init_mem_cpu"], "300MB");
  EXPECT_EQ(f["total_flos"], "114925GF");  // int(v) >> 30, as the Trainer computes it
  EXPECT_EQ(f["train_runtime"], "1:02:05.45");
}

// One rule of what a key holds (metric_unit()), which the table, the rank table and
// `memscope diff` follow: the Trainer's "_mem_", and byte keys of other sources by name.
TEST(MetricUnit, OneRuleForEveryKey) {
  EXPECT_EQ(metric_unit("train_mem_cpu_alloc_delta"), MetricUnit::memory);
  EXPECT_EQ(metric_unit("before_init_mem_cpu"), MetricUnit::memory);
  EXPECT_EQ(metric_unit("train_mem_gpu_peak_bound"), MetricUnit::memory);
  EXPECT_EQ(metric_unit("train_memscope_gpu_peaked_delta"), MetricUnit::bytes);  // memscope.hf
  EXPECT_EQ(metric_unit("train_memscope_cpu_begin"), MetricUnit::bytes);
  EXPECT_EQ(metric_unit("cpu_peaked_delta"), MetricUnit::bytes);  // a run's stage marks
  EXPECT_EQ(metric_unit("reserved_bytes"), MetricUnit::bytes);
  EXPECT_EQ(metric_unit("train_runtime"), MetricUnit::seconds);
  EXPECT_EQ(metric_unit("total_flos"), MetricUnit::flops);
  EXPECT_EQ(metric_unit("train_loss"), MetricUnit::number);
  EXPECT_EQ(metric_unit("memory"), MetricUnit::number);
  for (const char* key : {"train_mem_cpu_alloc_delta", "cpu_peaked_delta", "reserved_bytes",
                          "train_memscope_cpu_begin"}) {
    EXPECT_TRUE(is_memory_key(key)) << key;
  }
  for (const char* key : {"train_runtime", "total_flos", "train_loss", "bytes"}) {
    EXPECT_FALSE(is_memory_key(key)) << key;
  }
}

TEST(MetricUnit, TheTableAndTheRankTableShowTheSameKeysInBytes) {
  const Metrics metrics = {{"train_memscope_gpu_peaked_delta", 3 * kMiB},
                           {"reserved_bytes", 5 * kMiB},
                           {"train_mem_cpu_alloc_delta", 2 * kMiB},
                           {"train_samples", 3 * kMiB}};
  auto f = metrics_format(metrics);
  EXPECT_EQ(f["train_memscope_gpu_peaked_delta"], "3.00 MiB");
  EXPECT_EQ(f["reserved_bytes"], "5.00 MiB");
  EXPECT_EQ(f["train_mem_cpu_alloc_delta"], "2.00 MiB");
  EXPECT_EQ(f["train_samples"], std::to_string(3 * kMiB));
  // The Trainer formats its own "_mem_" keys only: the others print as it prints numbers.
  auto compat = metrics_format(metrics, {.trainer_compat = true});
  EXPECT_EQ(compat["train_mem_cpu_alloc_delta"], "2MB");
  EXPECT_EQ(compat["reserved_bytes"], std::to_string(5 * kMiB));
  std::map<std::string, double> rank;
  for (const auto& [key, value] : metrics) {
    rank[key] = static_cast<double>(std::get<std::int64_t>(value));
  }
  const std::string table = reduce({rank}).format();
  EXPECT_NE(table.find("3.00 MiB"), std::string::npos) << table;
  EXPECT_NE(table.find("5.00 MiB"), std::string::npos) << table;
  EXPECT_NE(table.find("2.00 MiB"), std::string::npos) << table;
  EXPECT_EQ(table.find("3.00 MiB", table.find("train_samples")), std::string::npos) << table;
}

TEST(MetricsFormat, RuntimesAndFloatsAsTheTrainerPrintsThem) {
  auto f = metrics_format(sample());
  EXPECT_EQ(f["train_runtime"], "1:02:05.45");
  EXPECT_EQ(f["train_loss"], "0.1235");
  EXPECT_EQ(f["epoch"], "3.0");
  auto g = metrics_format({{"eval_runtime", 0.5}, {"x_runtime", 90061.25}, {"n", std::int64_t{7}}});
  EXPECT_EQ(g["eval_runtime"], "0:00:00.50");
  EXPECT_EQ(g["x_runtime"], "1 day, 1:01:01.25");
  EXPECT_EQ(g["n"], "7");
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(MetricsTable, AlignedBlocksPerStage) {
  std::string table = format_metrics_table("train", sample());
  auto l = lines(table);
  ASSERT_GE(l.size(), 12u);
  EXPECT_EQ(l[0], "***** train metrics *****");
  // Blocks: keys without a stage, init (with before_init), then stages by name.
  EXPECT_EQ(l[1].substr(0, 7), "  epoch");
  EXPECT_EQ(l[2], "");
  EXPECT_NE(l[3].find("before_init_mem_cpu"), std::string::npos);
  EXPECT_NE(l[4].find("init_mem_cpu_alloc_delta"), std::string::npos);
  EXPECT_NE(l[5].find("init_mem_cpu_peaked_delta"), std::string::npos);
  EXPECT_EQ(l[6], "");
  EXPECT_NE(l[7].find("total_flos"), std::string::npos);
  EXPECT_EQ(l[8], "");
  EXPECT_NE(l[9].find("train_loss"), std::string::npos);
  EXPECT_NE(l[10].find("train_mem_cpu_alloc_delta"), std::string::npos);
  EXPECT_NE(l[11].find("train_mem_cpu_peaked_delta"), std::string::npos);  // alloc first
  // Every "=" in one column and every number ending at the same column; a text value follows
  // its "= " unpadded (a long one would otherwise push every number to the right).
  std::size_t eq = l[1].find(" = ");
  std::size_t width = l[1].size();
  for (const std::string& line : l) {
    if (line.empty() || line[0] == '*') continue;
    EXPECT_EQ(line.find(" = "), eq) << line;
    if (line.find("_mode") != std::string::npos) {
      EXPECT_EQ(line.substr(eq), " = peak-scope") << line;
    } else {
      EXPECT_EQ(line.size(), width) << line;
    }
  }
  // Memory values share a unit, so their decimal points line up too.
  EXPECT_EQ(l[10].rfind('.'), l[11].rfind('.'));
}

TEST(MetricsTable, LogWritesTheTable) {
  char* buffer = nullptr;
  std::size_t size = 0;
  std::FILE* out = open_memstream(&buffer, &size);
  ASSERT_NE(out, nullptr);
  log_metrics("eval", {{"eval_mem_cpu_alloc_delta", kMiB}}, out);
  std::fclose(out);
  std::string text(buffer, size);
  std::free(buffer);
  EXPECT_EQ(text, "***** eval metrics *****\n  eval_mem_cpu_alloc_delta = 1.00 MiB\n");
}

}  // namespace
}  // namespace memscope
