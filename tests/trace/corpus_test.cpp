// Which code is blamed, on every real PyTorch snapshot of the corpus (trace_corpus.hpp:
// MEMSCOPE_TRACES, else ../shared/traces; skipped, saying so, where there is none). PyTorch
// records C++ frames by default, so these stacks hold the unwinder, libtorch, CPython's C
// functions and "??" frames around the user's Python: the blamed frame must be the user's.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "memscope/trace.hpp"
#include "trace_corpus.hpp"

namespace memscope {
namespace {

namespace fs = std::filesystem;

// The corpus's PyTorch snapshots (its JSON traces are memscope's or RMM's, without stacks).
std::vector<fs::path> corpus() {
  std::vector<fs::path> out = corpus::all_traces();
  std::erase_if(out, [](const fs::path& p) { return p.extension() != ".pickle"; });
  return out;
}

#define SKIP_WITHOUT_CORPUS(files)                                                       \
  if ((files).empty()) {                                                                 \
    GTEST_SKIP() << "no PyTorch snapshots (*.pickle) in " << corpus::traces_dir()        \
                 << "; set MEMSCOPE_TRACES to a folder of them to run the corpus tests"; \
  }

bool contains_any(std::string_view text, std::initializer_list<std::string_view> needles) {
  return std::any_of(needles.begin(), needles.end(),
                     [&](std::string_view n) { return text.find(n) != std::string_view::npos; });
}

std::string slashes(std::string path) {
  std::replace(path.begin(), path.end(), '\\', '/');
  return path;
}

// Independent of the classifier: a Python file outside installed packages, the standard
// library, PyTorch and its generated code.
bool is_user_python(const TraceFrame& f) {
  const std::string file = slashes(f.filename);
  return file.ends_with(".py") &&
         !contains_any(file, {"site-packages", "dist-packages", "/torch/", "/lib/python3",
                              "torchinductor_", "<", "/python/cpython-"});
}

bool is_native(const TraceFrame& f) {
  for (std::string_view ext : {".c", ".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".S", ".o"}) {
    if (f.filename.ends_with(ext)) return true;
  }
  return false;
}

std::size_t code_points(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0U) != 0x80U;
  }));
}

TEST(Corpus, EveryStackWithUserPythonIsBlamedOnIt) {
  const std::vector<fs::path> files = corpus();
  SKIP_WITHOUT_CORPUS(files);
  std::size_t judged = 0;
  for (const fs::path& path : files) {
    SCOPED_TRACE(path.filename().string());
    const TorchSnapshot s = read_torch_snapshot_file(path);
    for (StackId id = 1; id < s.strings.stacks.size(); ++id) {
      const std::vector<TraceFrame> frames = s.strings.stack_frames(id);
      if (std::none_of(frames.begin(), frames.end(), is_user_python)) continue;
      const TraceFrame* blamed = blamed_frame(s.strings, id);
      ASSERT_NE(blamed, nullptr);
      EXPECT_TRUE(is_user_python(*blamed))
          << blamed->filename << ":" << blamed->line << " " << blamed->name;
      EXPECT_NE(blamed->filename, "??");
      EXPECT_FALSE(is_native(*blamed)) << blamed->filename;
      ++judged;
    }
  }
  EXPECT_GT(judged, 1000U);  // the corpus's stacks were really looked at
}

TEST(Corpus, TopSitesAtBothPeaksAreNeverPlumbingAndFitTheirWidth) {
  const std::vector<fs::path> files = corpus();
  SKIP_WITHOUT_CORPUS(files);
  for (const fs::path& path : files) {
    SCOPED_TRACE(path.filename().string());
    const TorchSnapshot s = read_torch_snapshot_file(path);
    for (const std::int64_t device : trace_devices(s)) {
      const ReplayResult r = replay_trace(s, device);
      ASSERT_TRUE(r.peak_live.happened());
      EXPECT_EQ(r.at_peak_live.bytes, static_cast<std::size_t>(r.peak_requested));
      for (const LiveBreakdown* live : {&r.at_peak_live, &r.at_peak_reserved}) {
        for (const ReplaySite& site : live->top_sites) {
          const std::string where = site.where();
          EXPECT_LE(code_points(where), kSiteWidth) << where;
          EXPECT_FALSE(where.starts_with("??")) << where;
          EXPECT_FALSE(where.starts_with("<no frames>") && site.origin != SiteOrigin::traced);
          if (site.frame.filename.empty() && site.frame.name.empty()) continue;
          // A stack with no Python (the autograd engine's thread) is named by the autograd
          // node or ATen operator that allocated; any other site is Python code.
          const bool engine =
              contains_any(site.frame.name, {"autograd::generated::", "at::_ops::"});
          EXPECT_TRUE(engine || site.frame.filename.ends_with(".py")) << where;
          if (engine) continue;
          EXPECT_NE(site.frame.filename, "??") << where;
          EXPECT_FALSE(is_native(site.frame)) << where;
        }
      }
    }
  }
}

// The two snapshots of issue 27: their largest site was "?? PyCMethod_New" and the compiled
// model's peak was 80% "<no frames>".
TEST(Corpus, NamedSnapshotsBlameTheUsersModel) {
  const auto medium_found =
      corpus::find_trace("torch_snapshot_cs336-medium_ctx512_bs4_train_step.pickle");
  const auto compiled_found =
      corpus::find_trace("torch_snapshot_gpt2-small_compiled_ctx64_bs1_train_step.pickle");
  if (!medium_found || !compiled_found) {
    GTEST_SKIP() << "the two snapshots of issue 27 are not in " << corpus::traces_dir()
                 << "; set MEMSCOPE_TRACES to the corpus";
  }
  const fs::path& medium = *medium_found;
  const fs::path& compiled = *compiled_found;
  for (const fs::path& path : {medium, compiled}) {
    SCOPED_TRACE(path.filename().string());
    const ReplayResult r = replay_trace(read_torch_snapshot_file(path));
    for (const LiveBreakdown* live : {&r.at_peak_live, &r.at_peak_reserved}) {
      // The largest site with a frame (the compiled model's largest is what it held from
      // before recording) is the user's model package.
      const auto top =
          std::find_if(live->top_sites.begin(), live->top_sites.end(),
                       [](const ReplaySite& site) { return !site.frame.name.empty(); });
      ASSERT_NE(top, live->top_sites.end());
      EXPECT_TRUE(slashes(top->frame.filename).find("/cs336_basics/") != std::string::npos)
          << top->where();
      for (const ReplaySite& site : live->top_sites) EXPECT_NE(site.where(), "<no frames>");
    }
  }
  // What the compiled model held from before recording is said to be that, and the blocks
  // freed in the trace are named by their free.
  const ReplayResult r = replay_trace(read_torch_snapshot_file(compiled));
  bool before = false;
  bool freed = false;
  for (const ReplaySite& site : r.at_peak_reserved.top_sites) {
    before = before || site.where() == "<allocated before recording>";
    freed = freed || (site.origin == SiteOrigin::freed_in_trace &&
                      site.where().starts_with("freed at ") && is_user_python(site.frame));
  }
  EXPECT_TRUE(before);
  EXPECT_TRUE(freed);
}

}  // namespace
}  // namespace memscope
