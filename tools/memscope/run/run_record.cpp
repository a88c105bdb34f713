// RunRecord <-> JSON ("format": "memscope-run", "version": 1). The layout mirrors the structs
// field by field, so a reader in another language needs no other documentation than
// run_record.hpp. Reading checks every field's type and names the first wrong one with its
// path ("processes[2].peak_rss"), because these files are edited, truncated and hand-made.
#include "run/run_record.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cli.hpp"

namespace memscope::cli {
namespace {

constexpr int kRunFormatVersion = 1;
constexpr const char* kRunFormat = "memscope-run";

using Json = nlohmann::json;

Json optional_int(const std::optional<int>& value) {
  return value ? Json(*value) : Json(nullptr);
}

Json rank_env_to_json(const RankEnv& env) {
  return Json{{"rank", optional_int(env.rank)},
              {"variable", env.rank_variable},
              {"local_rank", optional_int(env.local_rank)},
              {"world_size", optional_int(env.world_size)},
              {"local_world_size", optional_int(env.local_world_size)}};
}

Json process_to_json(const RunProcess& p) {
  Json json{{"pid", p.pid},
            {"ppid", p.ppid},
            {"command", p.command},
            {"start", p.start},
            {"end", p.end},
            {"peak_rss", p.peak_rss},
            {"peak_rss_source", p.peak_rss_source},
            {"peak_gpu", p.peak_gpu},
            {"exit_code", optional_int(p.exit_code)},
            {"exit_signal", optional_int(p.exit_signal)},
            {"t", p.t},
            {"rss", p.rss},
            {"gpu", p.gpu}};
  if (p.rank.rank) json["rank"] = rank_env_to_json(p.rank);
  return json;
}

Json rank_to_json(const RunRank& r) {
  return Json{{"rank", r.rank},
              {"variable", r.variable},
              {"local_rank", optional_int(r.local_rank)},
              {"world_size", optional_int(r.world_size)},
              {"local_world_size", optional_int(r.local_world_size)},
              {"pid", r.pid},
              {"command", r.command},
              {"pids", r.pids},
              {"peak_rss", r.peak_rss},
              {"peak_rss_source", r.peak_rss_source},
              {"own_peak_rss", r.own_peak_rss},
              {"sampled_peak_rss", r.sampled_peak_rss},
              {"sum_of_peaks", r.sum_of_peaks},
              {"peak_gpu", r.peak_gpu},
              {"start", r.start},
              {"end", r.end},
              {"exit_code", optional_int(r.exit_code)},
              {"exit_signal", optional_int(r.exit_signal)},
              {"stages", r.stages}};
}

Json mark_to_json(const RunMark& m) {
  return Json{{"t", m.t},         {"pid", m.pid}, {"kind", m.kind},
              {"stage", m.stage}, {"hwm", m.hwm}, {"metrics", m.metrics}};
}

Json stage_to_json(const RunStage& s) {
  return Json{{"name", s.name},
              {"pid", s.pid},
              {"begin", s.begin},
              {"end", s.end},
              {"tree_rss_peak", s.tree_rss_peak},
              {"gpu_peak", s.gpu_peak},
              {"metrics", s.metrics}};
}

Json gpu_to_json(const RunGpu& g) {
  return Json{{"index", g.index}, {"name", g.name}, {"total", g.total}, {"used", g.used}};
}

// Reads fields of one JSON object, naming `path` (where the object sits in the file) in every
// error so the message points at the exact field.
class Fields {
 public:
  Fields(const Json& object, std::string path, const std::string& source)
      : object_(object), path_(std::move(path)), source_(source) {
    if (!object_.is_object()) fail(path_.empty() ? "the document" : path_, "must be an object");
  }

  [[nodiscard]] const Json& at(const char* key) const {
    const auto it = object_.find(key);
    if (it == object_.end()) fail(name(key), "is missing");
    return *it;
  }

  [[nodiscard]] std::int64_t integer(const char* key) const {
    const Json& value = at(key);
    if (!value.is_number_integer()) fail(name(key), "must be an integer");
    return value.get<std::int64_t>();
  }
  [[nodiscard]] int small_int(const char* key) const {
    const std::int64_t value = integer(key);
    if (value < INT32_MIN || value > INT32_MAX) fail(name(key), "is out of range");
    return static_cast<int>(value);
  }
  [[nodiscard]] std::optional<int> optional_small_int(const char* key) const {
    const auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return std::nullopt;
    return small_int(key);
  }
  [[nodiscard]] double number(const char* key) const {
    const Json& value = at(key);
    if (!value.is_number()) fail(name(key), "must be a number");
    return value.get<double>();
  }
  [[nodiscard]] std::string text(const char* key) const {
    const Json& value = at(key);
    if (!value.is_string()) fail(name(key), "must be a string");
    return value.get<std::string>();
  }
  [[nodiscard]] const Json& array(const char* key) const {
    const Json& value = at(key);
    if (!value.is_array()) fail(name(key), "must be an array");
    return value;
  }
  template <class T>
  [[nodiscard]] std::vector<T> numbers(const char* key) const {
    std::vector<T> out;
    const Json& values = array(key);
    out.reserve(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      const Json& v = values[i];
      const bool ok = std::is_integral_v<T> ? v.is_number_integer() : v.is_number();
      if (!ok) {
        fail(fmt::format("{}[{}]", name(key), i),
             std::is_integral_v<T> ? "must be an integer" : "must be a number");
      }
      out.push_back(v.get<T>());
    }
    return out;
  }
  [[nodiscard]] std::map<std::string, std::int64_t> metrics(const char* key) const {
    std::map<std::string, std::int64_t> out;
    const auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return out;
    if (!it->is_object()) fail(name(key), "must be an object of integers");
    for (const auto& [metric, value] : it->items()) {
      if (!value.is_number_integer()) {
        fail(fmt::format("{}.{}", name(key), metric), "must be an integer");
      }
      out.emplace(metric, value.get<std::int64_t>());
    }
    return out;
  }

  // The object at `key`, read with the same source and a path naming it.
  [[nodiscard]] Fields object(const char* key) const { return {at(key), name(key), source_}; }
  [[nodiscard]] bool has(const char* key) const {
    const auto it = object_.find(key);
    return it != object_.end() && !it->is_null();
  }
  [[nodiscard]] std::vector<std::string> texts(const char* key) const {
    std::vector<std::string> out;
    const Json& values = array(key);
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (!values[i].is_string()) fail(fmt::format("{}[{}]", name(key), i), "must be a string");
      out.push_back(values[i].get<std::string>());
    }
    return out;
  }

  [[nodiscard]] std::string name(const char* key) const {
    return path_.empty() ? std::string(key) : path_ + "." + key;
  }

  [[noreturn]] void fail(const std::string& field, const char* problem) const {
    throw InputFailure(
        fmt::format("{}: field '{}' {} (a memscope run recording, written by "
                    "'memscope run --json')",
                    source_, field, problem));
  }

 private:
  const Json& object_;
  std::string path_;
  const std::string& source_;
};

RunProcess process_from_json(const Fields& f) {
  RunProcess p;
  p.pid = f.small_int("pid");
  p.ppid = f.small_int("ppid");
  p.command = f.text("command");
  p.start = f.number("start");
  p.end = f.number("end");
  p.peak_rss = f.integer("peak_rss");
  p.peak_rss_source = f.text("peak_rss_source");
  p.peak_gpu = f.integer("peak_gpu");
  p.exit_code = f.optional_small_int("exit_code");
  p.exit_signal = f.optional_small_int("exit_signal");
  p.t = f.numbers<double>("t");
  p.rss = f.numbers<std::int64_t>("rss");
  p.gpu = f.numbers<std::int64_t>("gpu");
  if (p.rss.size() != p.t.size()) f.fail(f.name("rss"), "must have one value per entry of 't'");
  if (!p.gpu.empty() && p.gpu.size() != p.t.size()) {
    f.fail(f.name("gpu"), "must be empty or have one value per entry of 't'");
  }
  if (f.has("rank")) {
    const Fields r = f.object("rank");
    p.rank.rank = r.optional_small_int("rank");
    p.rank.rank_variable = r.text("variable");
    p.rank.local_rank = r.optional_small_int("local_rank");
    p.rank.world_size = r.optional_small_int("world_size");
    p.rank.local_world_size = r.optional_small_int("local_world_size");
  }
  return p;
}

RunRank rank_from_json(const Fields& f) {
  RunRank r;
  r.rank = f.small_int("rank");
  r.variable = f.text("variable");
  r.local_rank = f.optional_small_int("local_rank");
  r.world_size = f.optional_small_int("world_size");
  r.local_world_size = f.optional_small_int("local_world_size");
  r.pid = f.small_int("pid");
  r.command = f.text("command");
  for (const std::int64_t pid : f.numbers<std::int64_t>("pids")) {
    if (pid < 0 || pid > INT32_MAX) f.fail(f.name("pids"), "must hold process ids");
    r.pids.push_back(static_cast<int>(pid));
  }
  r.peak_rss = f.integer("peak_rss");
  r.peak_rss_source = f.text("peak_rss_source");
  r.own_peak_rss = f.integer("own_peak_rss");
  r.sampled_peak_rss = f.integer("sampled_peak_rss");
  r.sum_of_peaks = f.integer("sum_of_peaks");
  r.peak_gpu = f.integer("peak_gpu");
  r.start = f.number("start");
  r.end = f.number("end");
  r.exit_code = f.optional_small_int("exit_code");
  r.exit_signal = f.optional_small_int("exit_signal");
  r.stages = f.texts("stages");
  return r;
}

RunMark mark_from_json(const Fields& f) {
  RunMark m;
  m.t = f.number("t");
  m.pid = f.small_int("pid");
  m.kind = f.text("kind");
  m.stage = f.text("stage");
  m.hwm = f.integer("hwm");
  m.metrics = f.metrics("metrics");
  return m;
}

RunStage stage_from_json(const Fields& f) {
  RunStage s;
  s.name = f.text("name");
  s.pid = f.small_int("pid");
  s.begin = f.number("begin");
  s.end = f.number("end");
  s.tree_rss_peak = f.integer("tree_rss_peak");
  s.gpu_peak = f.integer("gpu_peak");
  s.metrics = f.metrics("metrics");
  return s;
}

RunGpu gpu_from_json(const Fields& f) {
  RunGpu g;
  const std::int64_t index = f.integer("index");
  if (index < 0 || index > INT32_MAX) f.fail(f.name("index"), "must be a GPU index >= 0");
  g.index = static_cast<unsigned>(index);
  g.name = f.text("name");
  g.total = f.integer("total");
  g.used = f.numbers<std::int64_t>("used");
  return g;
}

// Reads each element of the array `key` with `read`.
template <class T, class Read>
std::vector<T> list_from_json(const Fields& f, const char* key, const std::string& source,
                              Read read) {
  std::vector<T> out;
  const Json& items = f.array(key);
  out.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    out.push_back(read(Fields(items[i], fmt::format("{}[{}]", key, i), source)));
  }
  return out;
}

}  // namespace

Json run_record_to_json(const RunRecord& record) {
  Json processes = Json::array();
  for (const RunProcess& p : record.processes) processes.push_back(process_to_json(p));
  Json marks = Json::array();
  for (const RunMark& m : record.marks) marks.push_back(mark_to_json(m));
  Json stages = Json::array();
  for (const RunStage& s : record.stages) stages.push_back(stage_to_json(s));
  Json gpus = Json::array();
  for (const RunGpu& g : record.gpus) gpus.push_back(gpu_to_json(g));
  Json json{{"format", kRunFormat},
            {"version", kRunFormatVersion},
            {"command", record.command},
            {"start_unix", record.start_unix},
            {"duration", record.duration},
            {"interval", record.interval},
            {"exit_code", record.exit_code},
            {"child_exit_code", optional_int(record.child_exit_code)},
            {"child_signal", optional_int(record.child_signal)},
            {"gpu_status", record.gpu_status},
            {"host_total", record.host_total},
            {"cgroup_limit", record.cgroup_limit},
            {"t", record.t},
            {"tree_rss", record.tree_rss},
            {"tree_gpu", record.tree_gpu},
            {"peak_tree_rss", record.peak_tree_rss},
            {"peak_tree_rss_t", record.peak_tree_rss_t},
            {"gpus", std::move(gpus)},
            {"processes", std::move(processes)},
            {"marks", std::move(marks)},
            {"stages", std::move(stages)},
            {"notes", record.notes}};
  if (!record.ranks.empty()) {
    Json ranks = Json::array();
    for (const RunRank& r : record.ranks) ranks.push_back(rank_to_json(r));
    json["ranks"] = std::move(ranks);
  }
  return json;
}

RunRecord run_record_from_json(const Json& json, const std::string& source) {
  const Fields f(json, "", source);
  if (!is_run_record(json)) {
    throw InputFailure(fmt::format(
        "{}: not a memscope run recording (\"format\" must be \"{}\"; 'memscope run --json "
        "FILE' writes one)",
        source, kRunFormat));
  }
  const std::int64_t version = f.integer("version");
  if (version < 1 || version > kRunFormatVersion) {
    throw InputFailure(
        fmt::format("{}: memscope-run version {} is not one this memscope reads "
                    "(it reads version {}); use a matching memscope",
                    source, version, kRunFormatVersion));
  }
  RunRecord r;
  const Json& command = f.array("command");
  for (std::size_t i = 0; i < command.size(); ++i) {
    if (!command[i].is_string()) f.fail(fmt::format("command[{}]", i), "must be a string");
    r.command.push_back(command[i].get<std::string>());
  }
  r.start_unix = f.number("start_unix");
  r.duration = f.number("duration");
  r.interval = f.number("interval");
  r.exit_code = f.small_int("exit_code");
  r.child_exit_code = f.optional_small_int("child_exit_code");
  r.child_signal = f.optional_small_int("child_signal");
  r.gpu_status = f.text("gpu_status");
  r.host_total = f.integer("host_total");
  r.cgroup_limit = f.integer("cgroup_limit");
  r.t = f.numbers<double>("t");
  r.tree_rss = f.numbers<std::int64_t>("tree_rss");
  r.tree_gpu = f.numbers<std::int64_t>("tree_gpu");
  if (r.tree_rss.size() != r.t.size()) f.fail("tree_rss", "must have one value per entry of 't'");
  if (!r.tree_gpu.empty() && r.tree_gpu.size() != r.t.size()) {
    f.fail("tree_gpu", "must be empty or have one value per entry of 't'");
  }
  r.peak_tree_rss = f.integer("peak_tree_rss");
  r.peak_tree_rss_t = f.number("peak_tree_rss_t");
  r.gpus = list_from_json<RunGpu>(f, "gpus", source, gpu_from_json);
  r.processes = list_from_json<RunProcess>(f, "processes", source, process_from_json);
  r.marks = list_from_json<RunMark>(f, "marks", source, mark_from_json);
  r.stages = list_from_json<RunStage>(f, "stages", source, stage_from_json);
  if (f.has("ranks")) r.ranks = list_from_json<RunRank>(f, "ranks", source, rank_from_json);
  if (json.contains("notes")) {
    const Json& notes = f.array("notes");
    for (std::size_t i = 0; i < notes.size(); ++i) {
      if (!notes[i].is_string()) f.fail(fmt::format("notes[{}]", i), "must be a string");
      r.notes.push_back(notes[i].get<std::string>());
    }
  }
  return r;
}

const RunStage* stage_at(const RunRecord& record, double t) {
  const RunStage* found = nullptr;
  for (const RunStage& s : record.stages) {
    const double end = s.end < 0.0 ? record.duration : s.end;
    if (s.begin <= t && t <= end && (found == nullptr || s.begin >= found->begin)) found = &s;
  }
  return found;
}

bool is_run_record(const Json& json) {
  if (!json.is_object()) return false;
  const auto it = json.find("format");
  return it != json.end() && it->is_string() && it->get<std::string>() == kRunFormat;
}

}  // namespace memscope::cli
