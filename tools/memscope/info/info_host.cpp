// `memscope info`, host side (info_host.hpp): /proc/meminfo and the cgroup memory limit.
#include "info/info_host.hpp"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "common/proc_status.hpp"

namespace memscope::cli {
namespace {

// The whole of a small file; nullopt-like empty + false when it cannot be read.
bool read_text(const std::string& path, std::string& out) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  out = text.str();
  return !in.bad();
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    const std::size_t at = text.find(sep);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

// v1 writes "no limit" as the largest page counter (LONG_MAX rounded down to a page): anything
// this large is no limit a machine could have.
constexpr std::int64_t kNoLimitAbove = std::int64_t{1} << 62;

// A limit file's value: bytes, or -1 for "max" / the v1 page counter's maximum; nullopt-like
// false when the file is missing or not a number.
bool read_limit(const std::string& file, std::int64_t& out) {
  std::string text;
  if (!read_text(file, text)) return false;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text == "max") {
    out = -1;
    return true;
  }
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) return false;
  out = value >= kNoLimitAbove ? -1 : value;
  return true;
}

struct Mount {
  std::string root;        // the part of the hierarchy that is mounted ("/" usually)
  std::string mountpoint;  // "/sys/fs/cgroup/memory"
};

// The mount of cgroup v1's memory hierarchy (version 1) or of cgroup2 (version 2), from
// /proc/self/mountinfo: "<id> <parent> <dev> <root> <mountpoint> <opts>... - <fstype> <src>
// <super opts>".
bool find_mount(int version, Mount& out) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    const auto head = split(std::string_view(line).substr(0, dash), ' ');
    const auto tail = split(std::string_view(line).substr(dash + 3), ' ');
    if (head.size() < 5 || tail.size() < 3) continue;
    const bool match = version == 2 ? tail[0] == "cgroup2" : tail[0] == "cgroup" && [&] {
      for (auto opt : split(tail[2], ','))
        if (opt == "memory") return true;
      return false;
    }();
    if (!match) continue;
    out.root = std::string(head[3]);
    out.mountpoint = std::string(head[4]);
    return true;
  }
  return false;
}

// The cgroup's directory under the mount: the path below the mounted root. Outside it (another
// cgroup namespace) the mountpoint itself is the best there is.
std::string directory_of(const Mount& mount, const std::string& path) {
  std::string below = path;
  if (mount.root != "/" && below.starts_with(mount.root)) below = below.substr(mount.root.size());
  if (below.empty() || below == "/") return mount.mountpoint;
  return mount.mountpoint + below;
}

}  // namespace

CgroupMemory read_cgroup_memory() {
  CgroupMemory cg;
  std::string text;
  if (!read_text("/proc/self/cgroup", text)) {
    cg.note = "/proc/self/cgroup cannot be read";
    return cg;
  }
  // "<id>:<controllers>:<path>": v1's memory controller is named; v2 is "0::<path>". Where both
  // exist (a hybrid host), memory is accounted by v1 if v1 has the controller.
  std::string v1_path;
  std::string v2_path;
  for (auto line : split(text, '\n')) {
    const auto fields = split(line, ':');
    if (fields.size() < 3) continue;
    const std::string path(line.substr(fields[0].size() + fields[1].size() + 2));
    if (fields[0] == "0" && fields[1].empty()) v2_path = path;
    for (auto controller : split(fields[1], ','))
      if (controller == "memory") v1_path = path;
  }
  Mount mount;
  const char* limit_file = nullptr;
  const char* current_file = nullptr;
  if (!v1_path.empty() && find_mount(1, mount)) {
    cg.version = 1;
    cg.path = v1_path;
    limit_file = "/memory.limit_in_bytes";
    current_file = "/memory.usage_in_bytes";
  } else if (!v2_path.empty() && find_mount(2, mount)) {
    cg.version = 2;
    cg.path = v2_path;
    limit_file = "/memory.max";
    current_file = "/memory.current";
  } else {
    cg.note = "no cgroup memory controller is mounted";
    return cg;
  }
  std::string dir = directory_of(mount, cg.path);
  std::int64_t current = -1;
  if (read_limit(dir + current_file, current) && current >= 0) cg.current = current;
  // The tightest limit on the way up to the mount's root applies (v2's root has no memory.max).
  bool found_any = false;
  std::string cgroup_path = cg.path;
  for (;;) {
    std::int64_t limit = -1;
    if (read_limit(dir + limit_file, limit)) {
      found_any = true;
      if (limit >= 0 && (cg.limit < 0 || limit < cg.limit)) {
        cg.limit = limit;
        cg.limit_at = cgroup_path.empty() ? "/" : cgroup_path;
      }
    }
    if (dir.size() <= mount.mountpoint.size()) break;
    dir = dir.substr(0, dir.rfind('/'));
    const std::size_t slash = cgroup_path.rfind('/');
    cgroup_path = slash == std::string::npos ? "" : cgroup_path.substr(0, slash);
  }
  if (!found_any && cg.current < 0) {
    cg.note = "the memory files of " + directory_of(mount, cg.path) + " cannot be read";
  }
  return cg;
}

HostInfo read_host_info() {
  std::string text;
  if (!read_text("/proc/meminfo", text)) {
    throw InputFailure("/proc/meminfo cannot be read: memscope info needs Linux's /proc");
  }
  HostInfo info;
  detail::for_each_status_field(text, [&](std::string_view key, std::string_view value) {
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

}  // namespace memscope::cli
