#include "memscope/process_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>

#include "common/proc_status.hpp"
#include "common/system_memory.hpp"

namespace memscope {

namespace {

struct ProcStat {
  std::string comm;
  int ppid = 0;
  std::uint64_t start_ticks = 0;
  std::uint64_t arg_start = 0;        // 0 when the kernel does not show it
  std::uint64_t children_faults = 0;  // cminflt: minor faults of the children it waited for
};

// /proc/<pid>/stat: "pid (comm) state ppid ... starttime ...". comm may hold spaces and
// parentheses, so the fields are counted from the last ')'.
std::optional<ProcStat> read_stat(int pid) {
  const std::optional<std::string> text = detail::read_proc_file(pid, "stat");
  if (!text) return std::nullopt;
  const std::size_t close = text->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::string_view rest = std::string_view(*text).substr(close + 1);
  ProcStat stat;
  const std::size_t open = text->find('(');
  if (open != std::string::npos && open < close)
    stat.comm = text->substr(open + 1, close - open - 1);
  // After ')': field 3 (state) is index 0, field 4 (ppid) index 1, field 11 (cminflt) 8,
  // field 22 (starttime) 19, field 48 (arg_start, Linux 3.5 and later) 45.
  for (int index = 0; index <= 45; ++index) {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    const std::size_t end = rest.find(' ');
    const std::string_view field = rest.substr(0, end);
    if (index == 1) {
      std::from_chars(field.data(), field.data() + field.size(), stat.ppid);
    } else if (index == 8) {
      std::from_chars(field.data(), field.data() + field.size(), stat.children_faults);
    } else if (index == 19) {
      std::from_chars(field.data(), field.data() + field.size(), stat.start_ticks);
    } else if (index == 45) {
      std::from_chars(field.data(), field.data() + field.size(), stat.arg_start);
    }
    if (end == std::string_view::npos) return index >= 19 ? std::optional(stat) : std::nullopt;
    rest.remove_prefix(end);
  }
  return stat;
}

void read_memory(TreeProcess& p) {
  const std::optional<std::string> text = detail::read_proc_file(p.pid, "status");
  if (!text) return;
  detail::for_each_status_field(*text, [&p](std::string_view key, std::string_view value) {
    if (key == "VmRSS") p.rss = detail::status_kib_as_bytes(value).value_or(-1);
    if (key == "VmHWM") p.hwm = detail::status_kib_as_bytes(value).value_or(-1);
    return false;
  });
}

struct DirCloser {
  void operator()(DIR* dir) const noexcept { ::closedir(dir); }
};

// Calls visit(n) for each entry of `folder` whose name is a positive number (pids, tids).
template <class Visit>
void for_each_numbered(const std::string& folder, Visit&& visit) {
  const std::unique_ptr<DIR, DirCloser> dir(::opendir(folder.c_str()));
  if (!dir) return;
  // readdir is only unsafe on a stream shared between threads; this one is ours alone.
  while (const dirent* entry = ::readdir(dir.get())) {  // NOLINT(concurrency-mt-unsafe)
    int n = 0;
    const std::string_view name(entry->d_name);
    const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), n);
    if (error == std::errc() && end == name.data() + name.size() && n > 0) visit(n);
  }
}

// Whether the kernel has /proc/<pid>/task/<tid>/children (CONFIG_PROC_CHILDREN).
// MEMSCOPE_RUN_FULL_SCAN=1 takes the other path, so tests cover both on any kernel.
bool have_children_files() {
  static const bool have = [] {
    const char* full = std::getenv("MEMSCOPE_RUN_FULL_SCAN");  // NOLINT(concurrency-mt-unsafe)
    if (full != nullptr && *full != '\0' && std::string_view(full) != "0") return false;
    const std::string path = "/proc/self/task/" + std::to_string(::gettid()) + "/children";
    return ::access(path.c_str(), R_OK) == 0;
  }();
  return have;
}

// The children of every thread of `pid`.
std::vector<int> children_of(int pid) {
  std::vector<int> children;
  const std::string task = "/proc/" + std::to_string(pid) + "/task";
  for_each_numbered(task, [&](int tid) {
    const std::string path = task + "/" + std::to_string(tid) + "/children";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    std::string text;
    char buffer[4096];
    ssize_t n = 0;
    while ((n = ::read(fd, buffer, sizeof buffer)) > 0)
      text.append(buffer, static_cast<std::size_t>(n));
    ::close(fd);
    std::string_view rest(text);
    while (const std::optional<std::int64_t> child = detail::take_number(rest)) {
      if (*child > 0 && *child <= INT32_MAX) children.push_back(static_cast<int>(*child));
    }
  });
  return children;
}

// Every process of /proc by parent: the fallback where children files are missing. Costs a
// read of every process's stat, so it is used only there.
std::vector<TreeProcess> scan_all(int root) {
  std::multimap<int, TreeProcess> by_parent;
  bool listed = false;
  for_each_numbered("/proc", [&](int pid) {
    listed = true;
    const std::optional<ProcStat> stat = read_stat(pid);
    if (!stat) return;  // gone since readdir
    by_parent.emplace(stat->ppid, TreeProcess{pid, stat->ppid, stat->start_ticks, stat->comm, -1,
                                              -1, stat->arg_start});
  });
  if (!listed) throw std::system_error(errno, std::generic_category(), "cannot list /proc");
  std::vector<TreeProcess> tree;
  std::vector<int> frontier{root};
  // A pid reused between two reads could in theory close a loop; a tree never has more
  // members than there are processes.
  while (!frontier.empty() && tree.size() <= by_parent.size()) {
    std::vector<int> next;
    for (const int parent : frontier) {
      const auto [first, last] = by_parent.equal_range(parent);
      for (auto it = first; it != last; ++it) {
        tree.push_back(it->second);
        next.push_back(it->second.pid);
      }
    }
    frontier = std::move(next);
  }
  return tree;
}

// Down from root through the children files: work in proportion to the tree, not the machine.
std::vector<TreeProcess> walk_children(int root) {
  std::vector<TreeProcess> tree;
  std::set<int> seen{root};
  std::vector<int> frontier{root};
  while (!frontier.empty()) {
    std::vector<int> next;
    for (const int parent : frontier) {
      for (const int child : children_of(parent)) {
        if (!seen.insert(child).second) continue;
        const std::optional<ProcStat> stat = read_stat(child);
        if (!stat) continue;  // gone already
        tree.push_back(
            TreeProcess{child, stat->ppid, stat->start_ticks, stat->comm, -1, -1, stat->arg_start});
        next.push_back(child);
      }
    }
    frontier = std::move(next);
  }
  return tree;
}

}  // namespace

std::vector<TreeProcess> scan_tree(int root) {
  std::vector<TreeProcess> tree = have_children_files() ? walk_children(root) : scan_all(root);
  for (TreeProcess& p : tree) read_memory(p);
  return tree;
}

std::optional<TreeProcess> read_process(int pid) {
  const std::optional<ProcStat> stat = read_stat(pid);
  if (!stat) return std::nullopt;
  TreeProcess p{pid, stat->ppid, stat->start_ticks, stat->comm, -1, -1, stat->arg_start};
  read_memory(p);
  return p;
}

std::optional<std::uint64_t> read_start_ticks(int pid) {
  const std::optional<ProcStat> stat = read_stat(pid);
  if (!stat) return std::nullopt;
  return stat->start_ticks;
}

std::optional<bool> read_reaped_a_child(int pid) {
  const std::optional<ProcStat> stat = read_stat(pid);
  if (!stat) return std::nullopt;
  return stat->children_faults > 0;
}

std::optional<std::string> read_arguments(int pid) {
  std::optional<std::string> text = detail::read_proc_file(pid, "cmdline");
  if (!text) return std::nullopt;
  while (!text->empty() && text->back() == '\0') text->pop_back();
  if (text->empty()) return std::nullopt;
  for (char& c : *text) {
    if (c == '\0') c = ' ';
  }
  return text;
}

std::string bracketed_name(int pid) {
  std::optional<std::string> comm = detail::read_proc_file(pid, "comm");
  if (!comm) return "";
  while (!comm->empty() && comm->back() == '\n') comm->pop_back();
  return "[" + *comm + "]";
}

std::string read_command_line(int pid) {
  if (std::optional<std::string> arguments = read_arguments(pid)) return std::move(*arguments);
  return bracketed_name(pid);
}

}  // namespace memscope
