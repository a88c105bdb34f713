#include "memscope/run_marks.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

namespace memscope {
namespace {

// Longer lines are not marks (the library writes one mark in at most PIPE_BUF bytes); a
// program that writes a stream without newlines must not grow our buffer without bound.
constexpr std::size_t kMaxLine = std::size_t{64} * 1024;

}  // namespace

std::optional<RunMark> parse_mark_line(std::string_view line, std::int64_t start_ns) {
  const nlohmann::json json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return std::nullopt;
  const auto member = [&json](const char* key) -> const nlohmann::json* {
    const auto it = json.find(key);
    return it == json.end() ? nullptr : &*it;
  };
  const nlohmann::json* tag = member("memscope_mark");
  const nlohmann::json* kind = member("kind");
  const nlohmann::json* stage = member("stage");
  const nlohmann::json* pid = member("pid");
  const nlohmann::json* t_ns = member("t_ns");
  if (tag == nullptr || !tag->is_number_integer() || tag->get<std::int64_t>() != 1) {
    return std::nullopt;
  }
  if (kind == nullptr || !kind->is_string() || stage == nullptr || !stage->is_string() ||
      pid == nullptr || !pid->is_number_integer() || t_ns == nullptr ||
      !t_ns->is_number_integer()) {
    return std::nullopt;
  }
  RunMark mark;
  mark.kind = kind->get<std::string>();
  if (mark.kind != "begin" && mark.kind != "end") return std::nullopt;
  mark.stage = stage->get<std::string>();
  const std::int64_t pid_value = pid->get<std::int64_t>();
  if (pid_value <= 0 || pid_value > INT32_MAX) return std::nullopt;
  mark.pid = static_cast<int>(pid_value);
  // Marks carry CLOCK_MONOTONIC, read after the run started: an earlier time is not a mark
  // of this run (t_ns -1 once became a stage at -4532 s), and subtracting it could overflow.
  const std::int64_t when = t_ns->get<std::int64_t>();
  if (when < start_ns) return std::nullopt;
  mark.t = static_cast<double>(when - start_ns) / 1e9;
  if (const nlohmann::json* hwm = member("hwm"); hwm != nullptr && hwm->is_number_integer()) {
    mark.hwm = hwm->get<std::int64_t>();
  }
  if (const nlohmann::json* metrics = member("metrics");
      metrics != nullptr && metrics->is_object()) {
    for (const auto& [name, value] : metrics->items()) {
      if (value.is_number_integer()) mark.metrics.emplace(name, value.get<std::int64_t>());
    }
  }
  return mark;
}

void MarkReader::drain(std::vector<RunMark>& out) {
  char buffer[8192];
  while (true) {
    const ssize_t n = ::read(fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // EAGAIN: empty for now
    std::string_view chunk(buffer, static_cast<std::size_t>(n));
    while (!chunk.empty()) {
      const std::size_t eol = chunk.find('\n');
      if (eol == std::string_view::npos) {
        partial_.append(chunk);
        if (partial_.size() > kMaxLine) {
          ++malformed_;
          partial_.clear();
        }
        break;
      }
      if (partial_.empty()) {
        take_line(chunk.substr(0, eol), out);
      } else {
        partial_.append(chunk.substr(0, eol));
        take_line(partial_, out);
        partial_.clear();
      }
      chunk.remove_prefix(eol + 1);
    }
  }
}

void MarkReader::take_line(std::string_view line, std::vector<RunMark>& out) {
  if (line.empty()) return;
  if (std::optional<RunMark> mark = parse_mark_line(line, start_ns_)) {
    out.push_back(std::move(*mark));
  } else {
    ++malformed_;
  }
}

std::vector<RunStage> pair_stages(const std::vector<RunMark>& marks, const std::vector<double>& t,
                                  const std::vector<std::int64_t>& tree_rss,
                                  const std::vector<std::int64_t>& tree_gpu, double run_end) {
  std::vector<RunStage> stages;
  // Open stages by (pid, name): indexes into `stages`, innermost last.
  std::map<std::pair<int, std::string>, std::vector<std::size_t>> open;
  for (const RunMark& mark : marks) {
    std::vector<std::size_t>& stack = open[{mark.pid, mark.stage}];
    if (mark.kind == "begin") {
      RunStage stage;
      stage.name = mark.stage;
      stage.pid = mark.pid;
      stage.begin = mark.t;
      stack.push_back(stages.size());
      stages.push_back(std::move(stage));
    } else if (!stack.empty()) {
      RunStage& stage = stages[stack.back()];
      stack.pop_back();
      stage.end = mark.t;
      stage.metrics = mark.metrics;
    }
  }
  for (RunStage& stage : stages) {
    const double end = stage.end < 0 ? run_end : stage.end;
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (t[i] < stage.begin || t[i] > end) continue;
      if (i < tree_rss.size()) stage.tree_rss_peak = std::max(stage.tree_rss_peak, tree_rss[i]);
      if (i < tree_gpu.size()) stage.gpu_peak = std::max(stage.gpu_peak, tree_gpu[i]);
    }
  }
  std::stable_sort(stages.begin(), stages.end(),
                   [](const RunStage& a, const RunStage& b) { return a.begin < b.begin; });
  return stages;
}

}  // namespace memscope
