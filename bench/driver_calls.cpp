// memscope_driver_calls: the CUDA driver calls a real trace costs, counted on the simulated device.
//
// The first H200 run (docs/gpu.md) found memscope's expandable segments 9-12x slower than
// PyTorch's when they map new memory. The time goes to driver calls, and how many of each a
// trace needs depends only on the allocator's decisions, so this program counts them without a
// GPU: each trace is replayed cold (from an empty cache) through memscope over a counting backend
// (counting_backend.hpp: the calls CudaBackend makes for each backend call), beside the models of
// PyTorch's default and expandable rules (torch_rules.hpp, torch_expandable_rules.hpp: PyTorch
// makes one cuMemAlloc per segment; with expandable segments one cuMemCreate + cuMemMap per page,
// 2 MiB small and 20 MiB large, and one cuMemSetAccess per map).
//
//   memscope_driver_calls [TRACE_OR_FOLDER ...]     (default: $MEMSCOPE_TRACES, else
//   ../shared/traces)
//
// Prints, per trace and setting, driver calls per 1,000 events and reserved / live at the peak.
#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "counting_backend.hpp"
#include "memscope/caching_allocator.hpp"
#include "memscope/config.hpp"
#include "memscope/errors.hpp"
#include "memscope/replay.hpp"
#include "memscope/simulated_backend.hpp"
#include "memscope/trace.hpp"
#include "memscope/units.hpp"
#include "torch_expandable_rules.hpp"
#include "torch_rules.hpp"

namespace {

namespace fs = std::filesystem;
using memscope::bench::DriverCalls;

struct Row {
  std::string setting;
  DriverCalls calls;
  double reserved_over_live = 0;
};

double per_1k(std::uint64_t calls, std::size_t events) {
  return static_cast<double>(calls) * 1000.0 /
         static_cast<double>(std::max<std::size_t>(events, 1));
}

Row memscope_row(const memscope::ReplayPlan& plan, const std::string& settings) {
  auto counting = std::make_shared<memscope::bench::CountingBackend>(
      std::make_shared<memscope::SimulatedBackend>(1024 * memscope::GiB));
  Row row{settings.empty() ? "memscope default" : "memscope " + settings, {}, 0};
  {
    memscope::CachingAllocator allocator(counting, memscope::AllocatorConfig::parse(settings));
    const memscope::ReplayResult r = memscope::replay(plan, allocator);
    row.reserved_over_live = static_cast<double>(r.peak_reserved) /
                             static_cast<double>(std::max<std::int64_t>(r.peak_requested, 1));
    row.calls = counting->calls();  // before the allocator's destructor gives everything back
  }
  return row;
}

Row torch_default_row(const memscope::ReplayPlan& plan) {
  const auto r =
      memscope::bench::replay_torch_rules(plan, memscope::bench::TieBreak::lowest_address);
  Row row{"PyTorch default (model)", {}, 0};
  row.calls.mem_alloc = r.segments;
  row.reserved_over_live = static_cast<double>(r.peak_reserved) /
                           static_cast<double>(std::max<std::uint64_t>(r.peak_requested, 1));
  return row;
}

Row torch_expandable_row(const memscope::ReplayPlan& plan) {
  const auto r = memscope::bench::replay_torch_expandable(plan);
  Row row{"PyTorch expandable_segments (model)", {}, 0};
  row.calls.mem_create = r.pages_mapped;
  row.calls.mem_map = r.pages_mapped;
  row.calls.mem_set_access = r.map_calls;
  row.calls.mappings_given_access = r.pages_mapped;
  row.reserved_over_live = static_cast<double>(r.peak_reserved) /
                           static_cast<double>(std::max<std::uint64_t>(r.peak_requested, 1));
  return row;
}

std::vector<fs::path> traces(int argc, char** argv) {
  std::vector<fs::path> places;
  for (int i = 1; i < argc; ++i) places.emplace_back(argv[i]);
  if (places.empty()) {
    const char* env = std::getenv("MEMSCOPE_TRACES");  // NOLINT(concurrency-mt-unsafe)
    places.emplace_back(env != nullptr && *env != '\0'
                            ? fs::path(env)
                            : fs::path(MEMSCOPE_SOURCE_DIR) / ".." / "shared" / "traces");
  }
  std::vector<fs::path> files;
  for (const fs::path& place : places) {
    if (fs::is_directory(place)) {
      for (const auto& entry : fs::directory_iterator(place)) {
        const std::string ext = entry.path().extension().string();
        if (ext == ".pickle" || ext == ".pkl" || ext == ".json") files.push_back(entry.path());
      }
    } else if (fs::exists(place)) {
      files.push_back(place);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<fs::path> files = traces(argc, argv);
  if (files.empty()) {
    fmt::print("memscope_driver_calls: no traces found (set MEMSCOPE_TRACES or pass files)\n");
    return 0;
  }
  // The large pool's page sets the number of mappings, and the mappings the time (PyTorch's large
  // page: 20 MiB).
  const std::vector<std::string> settings = {
      "", "expandable_segments:true", "expandable_segments:true,expandable_segments_page_size:8MiB",
      "expandable_segments:true,expandable_segments_page_size:16MiB",
      "expandable_segments:true,expandable_segments_page_size:32MiB"};
  fmt::print(
      "CUDA driver calls per 1,000 events, cold replay (the counting backend over the "
      "simulated device); a mapping is one cuMemCreate + cuMemMap, and the cuMemSetAccess that "
      "covers it\n\n");
  fmt::print(
      "| trace | setting | events | mappings | cuMemSetAccess calls | cuMemUnmap | "
      "cuStreamSynchronize | cuMemAlloc | cuMemFree | all calls | reserved / live |\n");
  fmt::print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const fs::path& file : files) {
    try {
      const memscope::ReplayPlan plan =
          memscope::build_replay_plan(memscope::read_trace_file(file));
      std::vector<Row> rows;
      for (const std::string& s : settings) rows.push_back(memscope_row(plan, s));
      rows.push_back(torch_default_row(plan));
      rows.push_back(torch_expandable_row(plan));
      const std::size_t events = plan.ops.size();
      for (const Row& r : rows) {
        const DriverCalls& c = r.calls;
        fmt::print(
            "| {} | {} | {} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | "
            "{:.4f} |\n",
            file.stem().string(), r.setting, events, per_1k(c.mappings_given_access, events),
            per_1k(c.mem_set_access, events), per_1k(c.mem_unmap, events),
            per_1k(c.stream_synchronize, events), per_1k(c.mem_alloc, events),
            per_1k(c.mem_free, events), per_1k(c.total(), events), r.reserved_over_live);
      }
    } catch (const std::exception& e) {
      fmt::print(stderr, "{}: {}\n", file.string(), e.what());
    }
  }
  return 0;
}
