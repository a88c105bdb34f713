// The machine's memory (include/memscope/host_info.hpp): /proc/meminfo and the cgroup limit,
// read through the host backend's cgroup reader so both agree on the limit.
#include "memscope/host_info.hpp"

#include <optional>
#include <string_view>
#include <vector>

#include "common/proc_status.hpp"
#include "common/system_memory.hpp"
#include "memscope/errors.hpp"

namespace memscope {
namespace {

// The cgroup (as /proc/self/cgroup names it) of the directory `at`, which is dir.path or one of
// its parents: dir.cgroup less the components walked up.
std::string cgroup_of(const detail::CgroupDir& dir, const std::string& at) {
  const std::string_view walked = std::string_view(dir.path).substr(at.size());
  std::string_view cgroup = dir.cgroup;
  if (cgroup.ends_with(walked)) cgroup.remove_suffix(walked.size());
  return cgroup.empty() ? "/" : std::string(cgroup);
}

}  // namespace

CgroupMemory read_cgroup_memory() noexcept {
  CgroupMemory cg;
  try {
    const std::optional<std::string> cgroups = detail::read_small_file("/proc/self/cgroup");
    if (!cgroups) {
      cg.note = "/proc/self/cgroup cannot be read";
      return cg;
    }
    const std::vector<detail::CgroupDir> dirs = detail::memory_cgroup_dirs(
        *cgroups, detail::read_small_file("/proc/self/mountinfo").value_or(""));
    if (dirs.empty()) {
      cg.note = "no cgroup memory controller is mounted";
      return cg;
    }
    const auto [chosen, tightest] = detail::tightest_cgroup(dirs);
    cg.version = chosen->v2 ? 2 : 1;
    cg.path = chosen->cgroup;
    if (tightest.limit != 0) {
      cg.limit = static_cast<std::int64_t>(tightest.limit);
      cg.limit_at = cgroup_of(*chosen, tightest.at);
    }
    if (const std::optional<std::size_t> usage = detail::cgroup_usage(*chosen))
      cg.current = static_cast<std::int64_t>(*usage);
    if (!tightest.readable && cg.current < 0)
      cg.note = "the memory files of " + chosen->path + " cannot be read";
  } catch (...) {  // out of memory while reading: report what was read
  }
  return cg;
}

HostInfo read_host_info() {
  const std::optional<std::string> text = detail::read_small_file("/proc/meminfo");
  if (!text) throw BackendUnavailableError("/proc/meminfo cannot be read");
  HostInfo info;
  detail::for_each_status_field(*text, [&](std::string_view key, std::string_view value) {
    std::int64_t* field = key == "MemTotal"       ? &info.mem_total
                          : key == "MemAvailable" ? &info.mem_available
                          : key == "SwapTotal"    ? &info.swap_total
                          : key == "SwapFree"     ? &info.swap_free
                                                  : nullptr;
    if (field != nullptr) *field = detail::status_kib_as_bytes(value).value_or(-1);
    return false;
  });
  info.cgroup = read_cgroup_memory();
  return info;
}

}  // namespace memscope
