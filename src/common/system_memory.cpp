#include "common/system_memory.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <optional>
#include <utility>
#include <vector>

#include "common/proc_status.hpp"

namespace memscope::detail {

std::optional<std::string> read_small_file(const std::string& path) {
  // O_CLOEXEC: `memscope run` reads /proc while another thread forks its command.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buffer, sizeof buffer)) != 0) {
    if (n > 0) {
      text.append(buffer, static_cast<std::size_t>(n));
    } else if (errno != EINTR) {
      ::close(fd);
      return std::nullopt;  // a directory, or a process gone while read
    }
  }
  ::close(fd);
  return text;
}

std::optional<std::string> read_proc_file(int pid, const char* name) {
  return read_small_file("/proc/" + std::to_string(pid) + "/" + name);
}

namespace {

// What cannot be read counts as empty: every caller below treats both as "not known".
std::string read_text(const std::string& path) {
  return read_small_file(path).value_or("");
}

// v1 writes "no limit" as the largest page counter (LONG_MAX rounded down to a page): anything
// this large is no limit a machine could have.
constexpr std::size_t kNoLimitAbove = std::size_t{1} << 62;

// A limit or usage file: a number, or "max" (v2) for no limit.
std::optional<std::size_t> read_number(const std::string& text) {
  std::size_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end == text.data()) return std::nullopt;
  return value;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    const std::size_t at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

bool has_item(std::string_view comma_list, std::string_view item) {
  const std::vector<std::string_view> items = split(comma_list, ',');
  return std::find(items.begin(), items.end(), item) != items.end();
}

struct Mount {
  std::string root;  // the cgroup path mounted there ("/" unless a container bind-mounts its own)
  std::string point;
};

// The v2 mount and the v1 memory mount, from /proc/self/mountinfo: "id parent dev root point
// options [optional fields] - fstype source super-options".
void find_mounts(std::string_view mountinfo, std::optional<Mount>& v2, std::optional<Mount>& v1) {
  for (const std::string_view line : split(mountinfo, '\n')) {
    const std::size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    const std::vector<std::string_view> head = split(line.substr(0, dash), ' ');
    const std::vector<std::string_view> tail = split(line.substr(dash + 3), ' ');
    if (head.size() < 5 || tail.size() < 3) continue;
    const Mount mount{std::string(head[3]), std::string(head[4])};
    if (tail[0] == "cgroup2" && !v2) v2 = mount;
    if (tail[0] == "cgroup" && has_item(tail[2], "memory") && !v1) v1 = mount;
  }
}

// The directory of cgroup `path` under `mount`, whose own root may be a prefix of the path.
std::string directory(const Mount& mount, std::string_view path) {
  if (mount.root != "/" && path.starts_with(mount.root)) path.remove_prefix(mount.root.size());
  std::string dir = mount.point;
  if (!path.empty() && path != "/") dir += path;
  return dir;
}

}  // namespace

std::vector<CgroupDir> memory_cgroup_dirs(std::string_view proc_self_cgroup,
                                          std::string_view proc_self_mountinfo) {
  std::optional<Mount> v2;
  std::optional<Mount> v1;
  find_mounts(proc_self_mountinfo, v2, v1);
  std::vector<CgroupDir> dirs;
  // "hierarchy-id:controllers:path"; v2 is "0::path".
  for (const std::string_view line : split(proc_self_cgroup, '\n')) {
    const std::size_t first = line.find(':');
    const std::size_t second = line.find(':', first + 1);
    if (first == std::string_view::npos || second == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string_view path = line.substr(second + 1);
    if (line.substr(0, first) == "0" && controllers.empty() && v2) {
      dirs.push_back({directory(*v2, path), v2->point, true, std::string(path)});
    } else if (has_item(controllers, "memory") && v1) {
      dirs.push_back({directory(*v1, path), v1->point, false, std::string(path)});
    }
  }
  return dirs;
}

CgroupLimit cgroup_limit(const CgroupDir& dir) {
  CgroupLimit tightest;
  const char* limit_file = dir.v2 ? "/memory.max" : "/memory.limit_in_bytes";
  const char* usage_file = dir.v2 ? "/memory.current" : "/memory.usage_in_bytes";
  std::string at = dir.path;
  while (true) {
    const std::string text = read_text(at + limit_file);
    tightest.readable = tightest.readable || !text.empty();
    const std::optional<std::size_t> limit = read_number(text);
    if (limit && *limit < kNoLimitAbove && (tightest.limit == 0 || *limit < tightest.limit)) {
      tightest.limit = *limit;
      tightest.usage = read_number(read_text(at + usage_file)).value_or(0);
      tightest.at = at;
    }
    if (at.size() <= dir.mount_point.size()) return tightest;
    at.resize(at.rfind('/'));
  }
}

TightestCgroup tightest_cgroup(const std::vector<CgroupDir>& dirs) {
  TightestCgroup tightest;
  for (const CgroupDir& dir : dirs) {
    CgroupLimit limit = cgroup_limit(dir);
    if (tightest.dir == nullptr ||
        (limit.limit != 0 && (tightest.limit.limit == 0 || limit.limit < tightest.limit.limit))) {
      tightest = {&dir, std::move(limit)};
    }
  }
  return tightest;
}

std::optional<std::size_t> cgroup_usage(const CgroupDir& dir) {
  return read_number(read_text(dir.path + (dir.v2 ? "/memory.current" : "/memory.usage_in_bytes")));
}

SystemMemory read_system_memory() noexcept {
  SystemMemory m;
  try {
    for_each_status_field(
        read_text("/proc/meminfo"), [&](std::string_view key, std::string_view value) {
          if (key == "MemTotal")
            m.total = static_cast<std::size_t>(status_kib_as_bytes(value).value_or(0));
          if (key == "MemAvailable") {
            m.available = static_cast<std::size_t>(status_kib_as_bytes(value).value_or(0));
          }
          return false;
        });
    const std::vector<CgroupDir> dirs =
        memory_cgroup_dirs(read_text("/proc/self/cgroup"), read_text("/proc/self/mountinfo"));
    const CgroupLimit c = tightest_cgroup(dirs).limit;
    if (c.limit != 0 && c.limit < m.total) {
      m.total = c.limit;
      m.available = std::min(m.available, c.limit > c.usage ? c.limit - c.usage : 0);
    }
  } catch (...) {  // out of memory while reading: report what was read
  }
  return m;
}

}  // namespace memscope::detail
