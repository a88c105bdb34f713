// Ranks of a distributed job under `memscope run`, as the command writes them: the ranks' JSON
// and summary. The rank variables are tested in tests/probes/rank_env_test.cpp, the grouping in
// tests/tracker/run_ranks_test.cpp, the launchers in test_run_ranks.py and
// test_run_distributed.py.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "memscope/errors.hpp"
#include "memscope/run_ranks.hpp"
#include "run/run_record.hpp"
#include "run/run_summary.hpp"
#include "watched_job.hpp"

namespace memscope::cli {
namespace {

using testing::job;
using testing::MiB;

TEST(RunRanks, RoundTripThroughJson) {
  RunRecord record = job();
  record.ranks = group_ranks(record);
  const nlohmann::json json = run_record_to_json(record);
  ASSERT_TRUE(json.contains("ranks"));
  EXPECT_EQ(json["ranks"].size(), 3U);
  EXPECT_EQ(json["processes"][1]["rank"]["rank"], 3);
  EXPECT_FALSE(json["processes"][0].contains("rank"));  // the launcher
  const RunRecord back = run_record_from_json(nlohmann::json::parse(json.dump()), "run.json");
  ASSERT_EQ(back.ranks.size(), 3U);
  EXPECT_EQ(back.ranks[1].pids, (std::vector<int>{11, 20}));
  EXPECT_EQ(back.ranks[1].peak_rss_source, "sampled sum");
  EXPECT_EQ(back.ranks[1].sum_of_peaks, 150 * MiB);
  EXPECT_EQ(back.ranks[2].stages, (std::vector<std::string>{"train", "eval"}));
  EXPECT_EQ(back.processes[3].rank.rank, 1);
  EXPECT_EQ(back.processes[3].rank.world_size, 4);
  EXPECT_FALSE(back.processes[0].rank.rank);
  EXPECT_EQ(run_record_to_json(back), json);

  // A recording without ranks (older, or no distributed job) reads as none.
  nlohmann::json plain = json;
  plain.erase("ranks");
  EXPECT_TRUE(run_record_from_json(plain, "run.json").ranks.empty());
  // A wrong field is named with its path.
  nlohmann::json broken = json;
  broken["ranks"][1]["peak_rss"] = "big";
  try {
    (void)run_record_from_json(broken, "run.json");
    FAIL() << "a string peak_rss was accepted";
  } catch (const ReportFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("ranks[1].peak_rss"), std::string::npos) << e.what();
  }
}

TEST(RunRanks, SummaryHasOneLinePerRankAndTheMax) {
  RunRecord record = job();
  record.ranks = group_ranks(record);
  const std::string text = format_run_summary(record);
  EXPECT_NE(text.find("Ranks (from each process's environment: RANK)"), std::string::npos);
  EXPECT_NE(text.find("max 400.00 MiB (rank 3), min 130.00 MiB (rank 1)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("3 of the job's 4 ranks"), std::string::npos) << text;
  EXPECT_NE(text.find("sum of peaks"), std::string::npos) << text;
  EXPECT_EQ(format_run_summary(RunRecord{}).find("Ranks"), std::string::npos);
}

}  // namespace
}  // namespace memscope::cli
