#include "process_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <system_error>

#include "common/proc_status.hpp"

namespace memscope::cli {
namespace {

// The whole of a small /proc file (stat, status, cmdline); nullopt when it cannot be opened,
// which for /proc means the process has gone.
std::optional<std::string> read_proc_file(int pid, const char* name) {
  const std::string path = "/proc/" + std::to_string(pid) + "/" + name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

struct Stat {
  std::string comm;
  int ppid = 0;
  std::uint64_t start_ticks = 0;
};

// /proc/<pid>/stat: "pid (comm) state ppid ... starttime ...". comm may hold spaces and
// parentheses, so the fields are counted from the last ')'.
std::optional<Stat> read_stat(int pid) {
  const std::optional<std::string> text = read_proc_file(pid, "stat");
  if (!text) return std::nullopt;
  const std::size_t close = text->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::string_view rest = std::string_view(*text).substr(close + 1);
  Stat stat;
  const std::size_t open = text->find('(');
  if (open != std::string::npos && open < close)
    stat.comm = text->substr(open + 1, close - open - 1);
  // After ')': field 3 (state) is index 0, field 4 (ppid) index 1, field 22 (starttime) 19.
  for (int index = 0; index <= 19; ++index) {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    const std::size_t end = rest.find(' ');
    const std::string_view field = rest.substr(0, end);
    if (index == 1) {
      std::from_chars(field.data(), field.data() + field.size(), stat.ppid);
    } else if (index == 19) {
      std::from_chars(field.data(), field.data() + field.size(), stat.start_ticks);
    }
    if (end == std::string_view::npos) return index == 19 ? std::optional(stat) : std::nullopt;
    rest.remove_prefix(end);
  }
  return stat;
}

void read_memory(TreeProcess& p) {
  const std::optional<std::string> text = read_proc_file(p.pid, "status");
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

}  // namespace

std::vector<TreeProcess> scan_tree(int root) {
  const std::unique_ptr<DIR, DirCloser> proc(::opendir("/proc"));
  if (!proc) throw std::system_error(errno, std::generic_category(), "cannot list /proc");
  std::multimap<int, TreeProcess> by_parent;
  // readdir is only unsafe on a stream shared between threads; this one is ours alone.
  while (const dirent* entry = ::readdir(proc.get())) {  // NOLINT(concurrency-mt-unsafe)
    int pid = 0;
    const std::string_view name(entry->d_name);
    const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (error != std::errc() || end != name.data() + name.size() || pid <= 0) continue;
    const std::optional<Stat> stat = read_stat(pid);
    if (!stat) continue;  // gone since readdir
    by_parent.emplace(stat->ppid,
                      TreeProcess{pid, stat->ppid, stat->start_ticks, stat->comm, -1, -1});
  }
  // Breadth first from root: parents come before their children.
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
  for (TreeProcess& p : tree) read_memory(p);
  return tree;
}

std::optional<std::uint64_t> read_start_ticks(int pid) {
  const std::optional<Stat> stat = read_stat(pid);
  if (!stat) return std::nullopt;
  return stat->start_ticks;
}

std::string read_command_line(int pid) {
  std::optional<std::string> text = read_proc_file(pid, "cmdline");
  if (text) {
    while (!text->empty() && text->back() == '\0') text->pop_back();
    for (char& c : *text) {
      if (c == '\0') c = ' ';
    }
    if (!text->empty()) return *text;
  }
  std::optional<std::string> comm = read_proc_file(pid, "comm");
  if (!comm) return "";
  while (!comm->empty() && comm->back() == '\n') comm->pop_back();
  return "[" + *comm + "]";
}

}  // namespace memscope::cli
