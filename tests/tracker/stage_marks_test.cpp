// Stage marks (stage_marks.hpp) on real pipes: the line format, whole lines from many threads and
// a forked child, the fallbacks when the inherited descriptor is gone, and never blocking.
#include "memscope/stage_marks.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "memscope/tracker.hpp"
#include "tracker/stage_marks_detail.hpp"

namespace {

using nlohmann::json;

// A pipe whose write end is named by the variables, as `memscope run` names its own.
class MarkPipe {
 public:
  MarkPipe() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    read_ = fds[0];
    write_ = fds[1];
    ::fcntl(read_, F_SETFL, O_NONBLOCK);
    ::fcntl(write_, F_SETPIPE_SZ, 1 << 20);  // room for every mark the tests write
  }
  MarkPipe(const MarkPipe&) = delete;
  MarkPipe& operator=(const MarkPipe&) = delete;
  ~MarkPipe() {
    ::unsetenv("MEMSCOPE_MARKS_FD");
    ::unsetenv("MEMSCOPE_MARKS_PATH");
    memscope::detail::reset_stage_marks();
    if (read_ >= 0) ::close(read_);
    ::close(write_);
  }

  [[nodiscard]] int write_end() const { return write_; }
  [[nodiscard]] std::string path() const { return "/proc/self/fd/" + std::to_string(write_); }

  // Names `fd` and `path` (either may be empty: unset) and forgets what was read before.
  static void name(const std::string& fd, const std::string& path) {
    if (fd.empty()) {
      ::unsetenv("MEMSCOPE_MARKS_FD");
    } else {
      ::setenv("MEMSCOPE_MARKS_FD", fd.c_str(), 1);
    }
    if (path.empty()) {
      ::unsetenv("MEMSCOPE_MARKS_PATH");
    } else {
      ::setenv("MEMSCOPE_MARKS_PATH", path.c_str(), 1);
    }
    memscope::detail::reset_stage_marks();
  }
  void name_both() const { name(std::to_string(write_), path()); }

  // Everything in the pipe now.
  [[nodiscard]] std::string drain() const {
    std::string out;
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(read_, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }

  // The marks in the pipe now; fails the test if any line is not one whole JSON object.
  [[nodiscard]] std::vector<json> marks() const {
    const std::string text = drain();
    std::vector<json> out;
    std::size_t start = 0;
    while (start < text.size()) {
      const std::size_t end = text.find('\n', start);
      EXPECT_NE(end, std::string::npos) << "a mark without its newline: " << text.substr(start);
      if (end == std::string::npos) break;
      const std::string line = text.substr(start, end - start);
      json j = json::parse(line, nullptr, false);
      EXPECT_FALSE(j.is_discarded()) << "not one JSON object: " << line;
      out.push_back(std::move(j));
      start = end + 1;
    }
    return out;
  }

  void close_read_end() {
    ::close(read_);
    read_ = -1;
  }

 private:
  int read_ = -1;
  int write_ = -1;
};

TEST(StageMarks, BeginAndEndLines) {
  MarkPipe pipe;
  pipe.name_both();
  ASSERT_TRUE(memscope::stage_marks_enabled());
  memscope::write_stage_mark("begin", "train");
  memscope::write_stage_mark("end", "train", {{"cpu_alloc_delta", -4096}, {"cpu_peaked_delta", 7}});
  const auto marks = pipe.marks();
  ASSERT_EQ(marks.size(), 2U);
  for (const json& m : marks) {
    EXPECT_EQ(m.at("memscope_mark"), 1);
    EXPECT_EQ(m.at("stage"), "train");
    EXPECT_EQ(m.at("pid"), ::getpid());
    EXPECT_GT(m.at("t_ns").get<std::int64_t>(), 0);
    EXPECT_GT(m.at("hwm").get<std::int64_t>(), 0);  // this process's peak RSS
  }
  EXPECT_EQ(marks[0].at("kind"), "begin");
  EXPECT_FALSE(marks[0].contains("metrics"));
  EXPECT_EQ(marks[1].at("kind"), "end");
  EXPECT_GE(marks[1].at("t_ns").get<std::int64_t>(), marks[0].at("t_ns").get<std::int64_t>());
  EXPECT_EQ(marks[1].at("metrics"), json({{"cpu_alloc_delta", -4096}, {"cpu_peaked_delta", 7}}));
}

TEST(StageMarks, OddNamesAreEscapedJson) {
  MarkPipe pipe;
  pipe.name_both();
  const std::string odd = "a\"b\\c\nd\te\x01\x7f f\xc3\xa9";  // quote, backslash, controls, é
  memscope::write_stage_mark("begin", odd);
  memscope::write_stage_mark("begin", "bad \xff utf8");  // not UTF-8: replaced, still JSON
  const auto marks = pipe.marks();
  ASSERT_EQ(marks.size(), 2U);
  EXPECT_EQ(marks[0].at("stage"), odd);
  EXPECT_EQ(marks[1].at("stage"), "bad \xef\xbf\xbd utf8");  // U+FFFD
}

TEST(StageMarks, ATooLongMarkIsDroppedNotSplit) {
  MarkPipe pipe;
  pipe.name_both();
  memscope::write_stage_mark("begin", std::string(5000, 'x'));  // over PIPE_BUF
  memscope::write_stage_mark("begin", "after");
  const auto marks = pipe.marks();
  ASSERT_EQ(marks.size(), 1U);
  EXPECT_EQ(marks[0].at("stage"), "after");
}

// Marks of several lengths from `threads` threads, `per_thread` each.
void write_from_threads(int threads, int per_thread) {
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([i, per_thread] {
      for (int k = 0; k < per_thread; ++k) {
        std::string name = std::to_string(i);
        name.append(static_cast<std::size_t>((k * 97) % 1500), 'n');
        memscope::write_stage_mark(k % 2 == 0 ? "begin" : "end", name, {{"k", k}});
      }
    });
  }
  for (auto& w : workers) w.join();
}

TEST(StageMarks, ThreadsAndAForkedChildWriteWholeLines) {
  MarkPipe pipe;
  pipe.name_both();
  ASSERT_TRUE(memscope::stage_marks_enabled());  // resolved in the parent before the fork
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    write_from_threads(4, 40);
    ::_exit(0);
  }
  write_from_threads(8, 40);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  int from_parent = 0;
  int from_child = 0;
  for (const json& m : pipe.marks()) {
    const int pid = m.at("pid").get<int>();
    EXPECT_TRUE(pid == ::getpid() || pid == child) << m;
    (pid == child ? from_child : from_parent) += 1;
  }
  EXPECT_EQ(from_parent, 8 * 40);
  EXPECT_EQ(from_child, 4 * 40);
}

TEST(StageMarks, AClosedDescriptorFallsBackToThePath) {
  MarkPipe pipe;
  const int inherited = ::dup(pipe.write_end());
  ASSERT_GE(inherited, 0);
  MarkPipe::name(std::to_string(inherited), pipe.path());
  ::close(inherited);  // as Python's subprocess (close_fds) or torchrun do
  ASSERT_TRUE(memscope::stage_marks_enabled());
  memscope::write_stage_mark("begin", "after-close");
  const auto marks = pipe.marks();
  ASSERT_EQ(marks.size(), 1U);
  EXPECT_EQ(marks[0].at("stage"), "after-close");
}

TEST(StageMarks, ADescriptorReusedForAnotherFileIsNotWritten) {
  MarkPipe pipe;
  ::fcntl(pipe.write_end(), F_SETFL, O_NONBLOCK);  // so the inherited descriptor is used
  const int inherited = ::dup(pipe.write_end());
  ASSERT_GE(inherited, 0);
  MarkPipe::name(std::to_string(inherited), pipe.path());
  memscope::write_stage_mark("begin", "first");
  // The number now names a file: marks must go to the pipe, never into the file.
  char file_name[] = "/tmp/memscope-marks-XXXXXX";
  const int file = ::mkstemp(file_name);
  ASSERT_GE(file, 0);
  ::unlink(file_name);
  ASSERT_EQ(::dup2(file, inherited), inherited);
  memscope::write_stage_mark("begin", "second");
  const auto marks = pipe.marks();
  ASSERT_EQ(marks.size(), 2U);
  EXPECT_EQ(marks[1].at("stage"), "second");
  EXPECT_EQ(::lseek(inherited, 0, SEEK_END), 0) << "a mark went into the reused descriptor";
  ::close(inherited);
  ::close(file);
}

TEST(StageMarks, WithoutTheVariablesMarksAreDisabled) {
  MarkPipe::name("", "");
  EXPECT_FALSE(memscope::stage_marks_enabled());
  memscope::write_stage_mark("begin", "nowhere");  // dropped, no crash
  // A descriptor that is not a pipe, and a path that does not exist, do not enable them either.
  MarkPipe::name("0", "/nonexistent/memscope-marks");
  EXPECT_FALSE(memscope::stage_marks_enabled());
  MarkPipe::name("", "");
}

TEST(StageMarks, AFullPipeDropsTheMarkWithoutBlocking) {
  MarkPipe pipe;
  ::fcntl(pipe.write_end(), F_SETPIPE_SZ, 4096);
  // Fill it through a non-blocking descriptor of its own; the inherited one stays blocking.
  const int filler = ::open(pipe.path().c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(filler, 0);
  const std::string block(512, 'x');
  while (::write(filler, block.data(), block.size()) > 0) {
  }
  ::close(filler);
  for (const bool with_path : {true, false}) {
    // With the path: a non-blocking descriptor of its own; without: the blocking inherited one,
    // written only when the pipe has room. Either way this returns (a hang fails by timeout).
    MarkPipe::name(std::to_string(pipe.write_end()), with_path ? pipe.path() : "");
    ASSERT_TRUE(memscope::stage_marks_enabled());
    memscope::write_stage_mark("begin", "dropped");
  }
  const std::string text = pipe.drain();
  EXPECT_EQ(text.find("dropped"), std::string::npos);
  memscope::write_stage_mark("begin", "room-again");  // the blocking one, now with room
  const auto marks = pipe.marks();
  ASSERT_EQ(marks.size(), 1U);
  EXPECT_EQ(marks[0].at("stage"), "room-again");
}

TEST(StageMarks, AGoneReaderDoesNotKillTheWriter) {
  MarkPipe pipe;
  ::fcntl(pipe.write_end(), F_SETFL, O_NONBLOCK);
  MarkPipe::name(std::to_string(pipe.write_end()), "");
  ASSERT_TRUE(memscope::stage_marks_enabled());
  pipe.close_read_end();
  memscope::write_stage_mark("begin", "nobody-reads");  // EPIPE, and no SIGPIPE
  sigset_t pending;
  sigemptyset(&pending);
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0);
}

TEST(StageMarks, TheTrackerWritesBeginAndEndWithItsMetrics) {
  MarkPipe pipe;
  pipe.name_both();
  {
    memscope::MemoryTracker tracker;  // host source; the implicit "init" stage begins
    {
      auto train = tracker.stage("train");
      // Straight from the kernel and back, so RSS falls at once (malloc and sanitizers may keep
      // freed memory).
      const std::size_t size = std::size_t{8} << 20;
      void* block =
          ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      ASSERT_NE(block, MAP_FAILED);
      std::memset(block, 1, size);
      ::munmap(block, size);
    }
  }
  const auto marks = pipe.marks();
  std::vector<std::string> seen;
  for (const json& m : marks) {
    seen.push_back(m.at("kind").get<std::string>() + " " + m.at("stage").get<std::string>());
  }
  const std::vector<std::string> expected = {"begin init", "end init", "begin train", "end train"};
  ASSERT_EQ(seen, expected);
  const json& end = marks[3];
  ASSERT_TRUE(end.contains("metrics"));
  EXPECT_TRUE(end.at("metrics").contains("cpu_alloc_delta"));
  // 8 MiB were touched and freed inside the stage: its peak is above its end.
  EXPECT_GE(end.at("metrics").at("cpu_peaked_delta").get<std::int64_t>(), 6 << 20);
  EXPECT_GE(end.at("hwm").get<std::int64_t>(), marks[2].at("hwm").get<std::int64_t>());
}

TEST(StageMarks, ASkippingTrackerWritesNothing) {
  MarkPipe pipe;
  pipe.name_both();
  {
    memscope::TrackerOptions options;
    options.skip_memory_metrics = true;
    memscope::MemoryTracker tracker(std::move(options));
    auto train = tracker.stage("train");
  }
  EXPECT_TRUE(pipe.marks().empty());
}

TEST(StageMarks, AStageLeftRunningEndsWithTheTracker) {
  MarkPipe pipe;
  pipe.name_both();
  {
    memscope::TrackerOptions options;
    options.implicit_init = false;
    memscope::MemoryTracker tracker(std::move(options));
    tracker.start("left-open");
  }
  const auto marks = pipe.marks();
  ASSERT_EQ(marks.size(), 2U);
  EXPECT_EQ(marks[1].at("kind"), "end");
  EXPECT_EQ(marks[1].at("stage"), "left-open");
}

}  // namespace
