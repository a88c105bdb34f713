// save_metrics / load_metrics: round trips, the all_results.json merge, and the atomic
// replacement surviving a crash or a failure between writing and renaming.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include <gtest/gtest.h>

#include "common/atomic_file.hpp"
#include "memscope/errors.hpp"
#include "memscope/metrics.hpp"

namespace memscope {
namespace {

namespace fs = std::filesystem;

class MetricsJson : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("memscope-json-" + std::to_string(getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::size_t files_in_dir() const {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), {}));
  }

  fs::path dir;
};

TEST_F(MetricsJson, RoundTrip) {
  Metrics m{{"train_mem_cpu_alloc_delta", std::int64_t{-123456789012}},
            {"train_runtime", 12.3456},
            {"train_mem_cpu_mode", std::string("kernel-hwm")},
            {"epoch", 3.0}};
  save_metrics("train", m, dir);
  EXPECT_EQ(load_metrics(dir / "train_results.json"), m);
  EXPECT_EQ(load_metrics(dir / "all_results.json"), m);
  // The Trainer's layout: indented by 4, keys sorted.
  std::string text = slurp(dir / "train_results.json");
  EXPECT_EQ(text.substr(0, 20), "{\n    \"epoch\": 3.0,\n");
}

// A NaN loss used to be written as null, which load_metrics then refused. Non-finite numbers
// are written as Python's json module writes them (NaN, Infinity, -Infinity) and read back.
TEST_F(MetricsJson, NonFiniteNumbersRoundTripAsPythonWritesThem) {
  const double inf = std::numeric_limits<double>::infinity();
  Metrics m{{"eval_loss", std::numeric_limits<double>::quiet_NaN()},
            {"grad_norm", inf},
            {"lr", -inf},
            {"note", std::string("NaN Infinity \"quoted\"")},
            {"steps", std::int64_t{7}}};
  save_metrics("eval", m, dir);
  const std::string text = slurp(dir / "eval_results.json");
  EXPECT_NE(text.find("\"eval_loss\": NaN,"), std::string::npos) << text;
  EXPECT_NE(text.find("\"grad_norm\": Infinity,"), std::string::npos) << text;
  EXPECT_NE(text.find("\"lr\": -Infinity,"), std::string::npos) << text;
  for (const fs::path& file : {dir / "eval_results.json", dir / "all_results.json"}) {
    const Metrics back = load_metrics(file);
    ASSERT_EQ(back.size(), m.size());
    EXPECT_TRUE(std::isnan(std::get<double>(back.at("eval_loss"))));
    EXPECT_EQ(std::get<double>(back.at("grad_norm")), inf);
    EXPECT_EQ(std::get<double>(back.at("lr")), -inf);
    EXPECT_EQ(back.at("note"), m.at("note"));
    EXPECT_EQ(back.at("steps"), m.at("steps"));
  }
  // Merging into a file that holds them keeps them.
  save_metrics("train", {{"train_loss", 1.5}}, dir);
  EXPECT_TRUE(std::isnan(std::get<double>(load_metrics(dir / "all_results.json").at("eval_loss"))));
}

TEST_F(MetricsJson, MergeKeepsEarlierKeys) {
  save_metrics("train", {{"train_loss", 0.5}, {"shared", std::int64_t{1}}}, dir);
  save_metrics("eval", {{"eval_loss", 0.7}, {"shared", std::int64_t{2}}}, dir);
  Metrics all = load_metrics(dir / "all_results.json");
  EXPECT_EQ(all.size(), 3u);
  EXPECT_EQ(std::get<double>(all.at("train_loss")), 0.5);
  EXPECT_EQ(std::get<double>(all.at("eval_loss")), 0.7);
  EXPECT_EQ(std::get<std::int64_t>(all.at("shared")), 2);  // the newer value wins
  EXPECT_EQ(load_metrics(dir / "eval_results.json").size(), 2u);
  save_metrics("test", {{"test_loss", 0.9}}, dir, /*combined=*/false);
  EXPECT_FALSE(load_metrics(dir / "all_results.json").contains("test_loss"));
}

TEST_F(MetricsJson, MergeKeepsKeysOfOtherTypesWrittenByOtherTools) {
  {
    std::ofstream out(dir / "all_results.json");
    out << R"({"config": {"lr": 0.1}, "tags": ["a"], "train_loss": 1.5})";
  }
  save_metrics("eval", {{"eval_loss", 0.7}}, dir);
  std::string text = slurp(dir / "all_results.json");
  EXPECT_NE(text.find("\"lr\": 0.1"), std::string::npos);
  EXPECT_NE(text.find("\"tags\""), std::string::npos);
  EXPECT_NE(text.find("\"eval_loss\""), std::string::npos);
}

TEST_F(MetricsJson, CorruptAllResultsIsRefusedAndLeftAlone) {
  {
    std::ofstream out(dir / "all_results.json");
    out << "{\"train_loss\": 1.5, ";  // cut short
  }
  EXPECT_THROW(save_metrics("eval", {{"eval_loss", 0.7}}, dir), Error);
  EXPECT_EQ(slurp(dir / "all_results.json"), "{\"train_loss\": 1.5, ");
}

TEST_F(MetricsJson, CrashBetweenWriteAndRenameLeavesTheOldFile) {
  const fs::path target = dir / "all_results.json";
  detail::write_file_atomically(target, "{\"old\": 1}\n");
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The new content is written and flushed; the process dies before the rename.
    detail::write_file_atomically(target, "{\"new\": 2}\n", [] { _exit(42); });
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 42) << "the child did not die at the hook";
  EXPECT_EQ(slurp(target), "{\"old\": 1}\n");
  EXPECT_EQ(load_metrics(target).size(), 1u);
}

TEST_F(MetricsJson, FailureBeforeRenameLeavesTheOldFileAndNoTemporary) {
  const fs::path target = dir / "eval_results.json";
  detail::write_file_atomically(target, "old");
  EXPECT_THROW(
      detail::write_file_atomically(target, "new", [] { throw std::runtime_error("disk full"); }),
      std::runtime_error);
  EXPECT_EQ(slurp(target), "old");
  EXPECT_EQ(files_in_dir(), 1u) << "the temporary file was left behind";
}

TEST_F(MetricsJson, UnwritableTargetIsABackendError) {
  EXPECT_THROW(detail::write_file_atomically(dir / "missing" / "x.json", "{}"), BackendError);
}

TEST_F(MetricsJson, BadSplitAndBadFiles) {
  EXPECT_THROW(save_metrics("../evil", {}, dir), UsageError);
  EXPECT_THROW(save_metrics("", {}, dir), UsageError);
  EXPECT_THROW((void)load_metrics(dir / "nope.json"), Error);
  {
    std::ofstream out(dir / "array.json");
    out << "[1, 2]";
  }
  EXPECT_THROW((void)load_metrics(dir / "array.json"), Error);
}

// parse_metrics(): what load_metrics() reads, from text (memscope report and diff tell a file's
// kind from the bytes they read once, issue 44). Costs milliseconds.
TEST(ParseMetrics, FlatObjectsOnly) {
  const std::optional<Metrics> m =
      parse_metrics(R"({"a": 1, "b": -2.5, "c": "text", "d": true, "e": false, "a": 3, "f": NaN,)"
                    R"( "g": -Infinity, "h": 18446744073709551615})");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(std::get<std::int64_t>(m->at("a")), 3);  // a repeated key keeps its last value
  EXPECT_EQ(std::get<double>(m->at("b")), -2.5);
  EXPECT_EQ(std::get<std::string>(m->at("c")), "text");
  EXPECT_EQ(std::get<std::int64_t>(m->at("d")), 1);
  EXPECT_EQ(std::get<std::int64_t>(m->at("e")), 0);
  EXPECT_TRUE(std::isnan(std::get<double>(m->at("f"))));
  EXPECT_EQ(std::get<double>(m->at("g")), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(std::get<double>(m->at("h")), 18446744073709551615.0);  // beyond int64
  EXPECT_TRUE(parse_metrics("{}").has_value());
  EXPECT_EQ(parse_metrics(R"({"s": "NaN"})")->at("s"), MetricValue(std::string("NaN")));
  for (const char* other :
       {"", "[1, 2]", "5", R"("x")", R"({"a": {"b": 1}})", R"({"a": [1]})", R"({"a": null})",
        R"({"a": 1} x)", R"({"a": 1)", "{NaN: 1}", R"({"a": 1e999})"}) {
    EXPECT_FALSE(parse_metrics(other).has_value()) << other;
  }
}

// load_metrics() reads a FIFO once, as the memscope command's inputs are read. Costs well under
// a second.
TEST_F(MetricsJson, LoadsFromAFifo) {
  const fs::path fifo = dir / "metrics.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::ofstream(fifo) << R"({"train_loss": 0.25, "train_mem_gpu_alloc_delta": 4096})";
    ::_exit(0);
  }
  const Metrics m = load_metrics(fifo);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(std::get<std::int64_t>(m.at("train_mem_gpu_alloc_delta")), 4096);
  EXPECT_EQ(std::get<double>(m.at("train_loss")), 0.25);
}

TEST_F(MetricsJson, CreatesTheOutputFolder) {
  save_metrics("train", {{"train_loss", 0.5}}, dir / "a" / "b");
  EXPECT_TRUE(fs::exists(dir / "a" / "b" / "all_results.json"));
}

}  // namespace
}  // namespace memscope
